// How a pipe message's (sender, tag) is packed into UCX's one 64-bit tag. UCX
// matches on tag bits alone and does not know which endpoint a message came from,
// so the sender's rank travels in the tag and receives match it exactly:
//
//   bit 63      1 for the pipe's own messages (hello, goodbye), 0 for the caller's
//   bits 32..62 the sender's world rank (ranks are ints: 31 bits are enough)
//   bits 0..31  the caller's tag (0..max_tag()), or the kind of an internal message
#pragma once

#include <cstdint>

#include <ucp/api/ucp.h>

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

}  // namespace thd::detail::ucx
