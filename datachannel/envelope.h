// What travels in front of every message, whatever the backend: which group plane
// and tag it belongs to (for matching) and what it is (for checking). The receiver
// compares the sender's MessageKind and size with its own before any payload byte
// lands, so mismatched calls fail with an error naming both instead of corrupting
// memory or hanging.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include <thd/datachannel.h>

namespace thd::detail {

// Which call a message belongs to.
enum class MessageOp : uint8_t {
  P2P = 0,
  Broadcast,
  Reduce,
  AllReduce,
  AllGather,
  ReduceScatter,
  Gather,
  Scatter,
  AllToAll,
  Barrier,
  AllReduceFlagged,  // runtime_queries.h
};
inline constexpr MessageOp kLastMessageOp = MessageOp::AllReduceFlagged;
std::string_view message_op_name(MessageOp op);

// dtype value for raw-byte messages.
inline constexpr uint8_t kRawBytes = 0xff;

struct MessageKind {
  MessageOp op = MessageOp::P2P;
  uint8_t dtype = kRawBytes;  // a thd::DType, or kRawBytes
  uint8_t reduce = 0;         // a thd::ReduceOp, for ops that reduce
  int32_t root = -1;          // group rank, for rooted collectives
  uint64_t count = 0;         // elements of the call's input (bytes for raw)

  bool operator==(const MessageKind&) const = default;
};

// "all_reduce(float32, 100 elements, sum)", "send(int64, 7 elements)", "send(12 bytes)"
std::string describe(const MessageKind& kind);

struct Envelope {
  // Group plane: the group's id * 2, + 1 for its collective traffic.
  uint32_t context = 0;
  // p2p: the user's tag. Collectives: the user tag << 32 | the call's sequence number.
  int64_t tag = 0;
  MessageKind kind;
};

inline uint32_t p2p_context(uint32_t group_id) { return group_id * 2; }
inline uint32_t collective_context(uint32_t group_id) { return group_id * 2 + 1; }

// What a collective mismatch error knows beyond its text: the rank whose message
// did not match this rank's call (world rank) and that message's kind, so the
// collective that sees it can tell the other members (collectives/mismatch_notice.h).
struct CollectiveMismatch {
  int peer = -1;
  MessageKind theirs;
};

// The error a transport fails a receive with when the matched message is not what
// the receiver expects (different kind, or a size other than expected_bytes). A
// TypeError for dtypes that differ, ValueError otherwise; names both ranks. For a
// collective it is also a CollectiveMismatch.
std::exception_ptr message_mismatch(int rank, int peer, const Envelope& expected, size_t expected_bytes,
                                    const Envelope& got, size_t got_bytes);

// The CollectiveMismatch an error made by message_mismatch carries, nullopt for
// any other error.
std::optional<CollectiveMismatch> collective_mismatch_of(const std::exception_ptr& error) noexcept;

// Checks a matched message against a posted receive: nullptr when they agree.
inline std::exception_ptr check_match(int rank, int peer, const Envelope& expected, size_t expected_bytes,
                                      const Envelope& got, size_t got_bytes) {
  if (expected.kind == got.kind && expected_bytes == got_bytes) return nullptr;
  return message_mismatch(rank, peer, expected, expected_bytes, got, got_bytes);
}

}  // namespace thd::detail
