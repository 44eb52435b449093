// A member whose collective finds that the members called different collectives
// tells every other member of the group, so they fail that call at once with an
// error naming the mismatch rather than waiting out the deadline for messages the
// mismatched rank never sends (the members that hear the mismatch directly are
// few: often only the mismatched rank's neighbours in the algorithm).
//
// A notice is one small message on a plane of its own: the group's collective
// context with its top bit set, which no group's own messages use, and the call's
// tag, so only the same call (group, caller's tag, sequence number) on the
// receiving rank takes it and no data message of any call ever matches it. A
// member posts its receive for notices only once a wait of its call has lasted a
// liveness slice (Comm::wait), so a call whose members agree sends and receives
// nothing more. A notice that comes after its call ended stays unmatched: no later
// call has its sequence number.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>

#include "datachannel/envelope.h"

namespace thd::detail {

// The envelope notices about the call with envelope `call` travel with: raw bytes
// of kMismatchNoticeBytes, on the group's notice plane and the call's tag.
Envelope mismatch_notice_envelope(const Envelope& call);
// Whether a message with envelope `e` is a mismatch notice.
bool is_mismatch_notice(const Envelope& e) noexcept;

struct MismatchNotice {
  MessageKind caller;  // the call of the member that found the mismatch
  int32_t peer = -1;   // the world rank whose message did not match it
  MessageKind theirs;  // what that rank called

  bool operator==(const MismatchNotice&) const = default;
};

inline constexpr size_t kMismatchNoticeBytes = 40;
using MismatchNoticeBytes = std::array<uint8_t, kMismatchNoticeBytes>;

MismatchNoticeBytes encode_mismatch_notice(const MismatchNotice& notice) noexcept;
MismatchNotice decode_mismatch_notice(std::span<const uint8_t, kMismatchNoticeBytes> bytes) noexcept;

// The error this rank (world rank `rank`) fails its call `mine` with on a notice
// from world rank `sender`: worded as if this rank had seen the mismatch itself —
// the sender's call when it differs from this rank's, else the call the sender
// found that differs from both.
std::exception_ptr noticed_mismatch(int rank, int sender, const Envelope& mine, const MismatchNotice& notice);

}  // namespace thd::detail
