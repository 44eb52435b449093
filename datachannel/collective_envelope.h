// The envelope of a collective call's messages: the group's collective plane, and
// a tag that holds the caller's tag and the call's sequence number on (group,
// tag). launch_collective makes it; pipe/collective_tag.h reads the two back to
// pack them into a library's tag.
#pragma once

#include <cstdint>

#include "datachannel/envelope.h"

namespace thd::detail {

inline Envelope collective_envelope(uint32_t group_id, int64_t user_tag, uint32_t sequence, const MessageKind& kind) {
  return {collective_context(group_id), (user_tag << 32) | static_cast<int64_t>(sequence), kind};
}
constexpr int64_t collective_user_tag(int64_t envelope_tag) { return envelope_tag >> 32; }
constexpr uint32_t collective_sequence(int64_t envelope_tag) { return static_cast<uint32_t>(envelope_tag); }

}  // namespace thd::detail
