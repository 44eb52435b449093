// How messages are packed into UCX's one 64-bit tag: the pipe's (below), and thd's
// point-to-point messages matched by UCX itself (further below).
//
// A pipe message's (sender, tag). UCX
// matches on tag bits alone and does not know which endpoint a message came from,
// so the sender's rank travels in the tag and receives match it exactly:
//
//   bit 63      1 for the pipe's own messages (hello, goodbye), 0 for the caller's
//   bits 32..62 the sender's world rank (ranks are ints: 31 bits are enough)
//   bits 0..31  the caller's tag (0..max_tag()), or the kind of an internal message
#pragma once

#include <cstdint>
#include <optional>

#include <ucp/api/ucp.h>

#include <thd/datachannel.h>
#include <thd/dtype.h>

#include "datachannel/envelope.h"

namespace thd::detail::ucx {

inline constexpr ucp_tag_t kInternalBit = ucp_tag_t{1} << 63;
inline constexpr ucp_tag_t kSenderMask = ucp_tag_t{0x7fffffff} << 32;
inline constexpr ucp_tag_t kTagMask = 0xffffffffULL;
// Receives match every bit: one sender, one tag, caller's or internal.
inline constexpr ucp_tag_t kExactMask = ~ucp_tag_t{0};

// The pipe's own messages, in the low 32 bits of an internal tag.
enum class InternalMessage : uint32_t {
  // Set-up: every rank greets every peer once, so make_pipe returns only when
  // each peer's endpoint carries messages both ways.
  Hello = 1,
  // Sent by a pipe's destructor: the peer fails what it still waits for from us
  // at once instead of when (or if) UCX notices.
  Goodbye = 2,
};

constexpr ucp_tag_t user_tag(int sender, uint32_t tag) {
  return (static_cast<ucp_tag_t>(static_cast<uint32_t>(sender)) << 32) | tag;
}

constexpr ucp_tag_t internal_tag(int sender, InternalMessage kind) {
  return kInternalBit | user_tag(sender, static_cast<uint32_t>(kind));
}

constexpr int sender_of(ucp_tag_t tag) { return static_cast<int>((tag & kSenderMask) >> 32); }

// ---- thd's own point-to-point messages, matched by UCX itself ----
//
// A message whose envelope fits is sent with every field its receive matches on,
// and its kind, in the tag (bit 62 set; bit 63 clear):
//
//   bits 57..61  the payload's dtype (0..kNumDTypes-1), or kNativeRawBytes
//   bits 37..56  the sender's world rank
//   bits 24..36  the group id (the envelope's p2p context / 2)
//   bits 0..23   the caller's tag
//
// A receive matches on everything but the dtype (and the sender, for kAnySource),
// and checks the sender's dtype and the message's length when it completes: a
// point-to-point message's kind is its dtype and its element count, so a mismatch
// is caught whole. A collective's messages have a layout of their own
// (pipe/collective_tag.h), marked by bits 63 and 62 both set, which no tag here
// has: the pipe's own messages clear bit 62 (below), point-to-point ones bit 63.
// An envelope that does not fit (native_tag() says nullopt) travels on the pipe's
// control tag instead (the software matching), as every message of its (context,
// tag) does, so the two paths never share an order to keep; no two envelopes
// share a tag.
inline constexpr ucp_tag_t kNativeBit = ucp_tag_t{1} << 62;
inline constexpr int kNativeTagBits = 24;
inline constexpr int kNativeGroupBits = 13;
inline constexpr int kNativeSenderBits = 20;
inline constexpr int kNativeDTypeBits = 5;
inline constexpr int kNativeGroupShift = kNativeTagBits;
inline constexpr int kNativeSenderShift = kNativeGroupShift + kNativeGroupBits;
inline constexpr int kNativeDTypeShift = kNativeSenderShift + kNativeSenderBits;
inline constexpr ucp_tag_t kNativeTagMask = (ucp_tag_t{1} << kNativeTagBits) - 1;
inline constexpr ucp_tag_t kNativeGroupMask = ((ucp_tag_t{1} << kNativeGroupBits) - 1) << kNativeGroupShift;
inline constexpr ucp_tag_t kNativeSenderMask = ((ucp_tag_t{1} << kNativeSenderBits) - 1) << kNativeSenderShift;
inline constexpr ucp_tag_t kNativeDTypeMask = ((ucp_tag_t{1} << kNativeDTypeBits) - 1) << kNativeDTypeShift;
inline constexpr uint32_t kNativeRawBytes = (1U << kNativeDTypeBits) - 1;
inline constexpr int64_t kMaxNativeTag = static_cast<int64_t>(kNativeTagMask);
inline constexpr uint32_t kMaxNativeGroup = (1U << kNativeGroupBits) - 1;
inline constexpr int kMaxNativeSender = (1 << kNativeSenderBits) - 1;

// The fields tile bits 0..61 exactly, clear of the two space bits.
static_assert(kNativeDTypeShift + kNativeDTypeBits == 62);
static_assert((kNativeTagMask & kNativeGroupMask) == 0 && (kNativeGroupMask & kNativeSenderMask) == 0 &&
              (kNativeSenderMask & kNativeDTypeMask) == 0);
static_assert((kNativeTagMask | kNativeGroupMask | kNativeSenderMask | kNativeDTypeMask) == (kNativeBit - 1));
static_assert(kNumDTypes < static_cast<int>(kNativeRawBytes), "every dtype and raw bytes need a code of their own");
// The pipe's own tags keep clear of the native space in a world whose ranks all
// fit a native tag's sender field (native matching is for such worlds only):
// their sender field (bits 32..62) then never reaches bit 62.
static_assert((user_tag(kMaxNativeSender, 0xffffffffU) & kNativeBit) == 0);

// The fields of a native tag.
struct NativeFields {
  uint32_t dtype = kNativeRawBytes;  // a DType's value, or kNativeRawBytes
  int sender = 0;
  uint32_t group = 0;
  int64_t tag = 0;
  bool operator==(const NativeFields&) const = default;
};

// The dtype code of a message kind's dtype field (detail::kRawBytes for raw bytes).
constexpr uint32_t native_dtype(uint8_t dtype) {
  return dtype == detail::kRawBytes ? kNativeRawBytes : static_cast<uint32_t>(dtype);
}

// Whether a message with this envelope from `sender` is matched natively: a
// point-to-point envelope whose group, tag, dtype and sender fit their fields.
constexpr bool fits_native(const Envelope& e, int sender) {
  const MessageKind& k = e.kind;
  return (e.context % 2) == 0 && e.context / 2 <= kMaxNativeGroup && e.tag >= 0 && e.tag <= kMaxNativeTag &&
         k.op == MessageOp::P2P && k.reduce == 0 && k.root == -1 &&
         (k.dtype == detail::kRawBytes || k.dtype < kNumDTypes) && sender >= 0 && sender <= kMaxNativeSender;
}

constexpr ucp_tag_t pack_native(const NativeFields& f) {
  return kNativeBit | (static_cast<ucp_tag_t>(f.dtype) << kNativeDTypeShift) |
         (static_cast<ucp_tag_t>(static_cast<uint32_t>(f.sender)) << kNativeSenderShift) |
         (static_cast<ucp_tag_t>(f.group) << kNativeGroupShift) | static_cast<ucp_tag_t>(f.tag);
}

constexpr NativeFields unpack_native(ucp_tag_t tag) {
  return {static_cast<uint32_t>((tag & kNativeDTypeMask) >> kNativeDTypeShift),
          static_cast<int>((tag & kNativeSenderMask) >> kNativeSenderShift),
          static_cast<uint32_t>((tag & kNativeGroupMask) >> kNativeGroupShift),
          static_cast<int64_t>(tag & kNativeTagMask)};
}

// The tag a message with envelope `e` from `sender` is sent with; nullopt when it
// does not fit (fits_native), and then it takes the software path.
constexpr std::optional<ucp_tag_t> native_tag(const Envelope& e, int sender) {
  if (!fits_native(e, sender)) return std::nullopt;
  return pack_native({native_dtype(e.kind.dtype), sender, e.context / 2, e.tag});
}

// A receive's tag and mask for envelope `e` from `source` (kAnySource allowed):
// everything but the dtype, and but the sender for kAnySource. Only for envelopes
// that fit (with `source`, or rank 0 for kAnySource).
struct NativeMatch {
  ucp_tag_t tag;
  ucp_tag_t mask;
};
constexpr NativeMatch native_match(const Envelope& e, int source) {
  const bool any = source == kAnySource;
  const ucp_tag_t tag = pack_native({0, any ? 0 : source, e.context / 2, e.tag});
  const ucp_tag_t mask = ~kNativeDTypeMask & (any ? ~kNativeSenderMask : ~ucp_tag_t{0});
  return {tag, mask};
}

}  // namespace thd::detail::ucx
