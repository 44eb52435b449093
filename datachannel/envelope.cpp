#include "datachannel/envelope.h"

#include <fmt/format.h>

#include "datachannel/check.h"
#include "datachannel/unnamed_count.h"

namespace thd::detail {

std::string_view message_op_name(MessageOp op) {
  switch (op) {
    case MessageOp::P2P: return "send";
    case MessageOp::Broadcast: return "broadcast";
    case MessageOp::Reduce: return "reduce";
    case MessageOp::AllReduce: return "all_reduce";
    case MessageOp::AllGather: return "all_gather";
    case MessageOp::ReduceScatter: return "reduce_scatter";
    case MessageOp::Gather: return "gather";
    case MessageOp::Scatter: return "scatter";
    case MessageOp::AllToAll: return "all_to_all";
    case MessageOp::Barrier: return "barrier";
    case MessageOp::AllReduceFlagged: return "flagged_all_reduce";
  }
  return "unknown op";
}

namespace {

bool reduces(MessageOp op) {
  return op == MessageOp::Reduce || op == MessageOp::AllReduce || op == MessageOp::ReduceScatter ||
         op == MessageOp::AllReduceFlagged;
}
bool rooted(MessageOp op) {
  return op == MessageOp::Broadcast || op == MessageOp::Reduce || op == MessageOp::Gather ||
         op == MessageOp::Scatter;
}

// A thd error that also says which collectives did not match.
template <typename E>
class CollectiveMismatchError : public E, public CollectiveMismatch {
 public:
  CollectiveMismatchError(std::string message, ErrorContext context, CollectiveMismatch what)
      : E(std::move(message), std::move(context)), CollectiveMismatch(what) {}
};

}  // namespace

std::string describe(const MessageKind& kind) {
  // Bytes off the wire may hold any value: name unknown codes by number.
  const bool known_dtype = kind.dtype < kNumDTypes;
  std::string what;
  if (kind.op == MessageOp::Barrier) return "barrier";
  if (kind.count == kUnnamedCount) {
    constexpr std::string_view unnamed = "a count too large for its message tag to name";
    if (kind.dtype == kRawBytes) {
      what = fmt::format("bytes, {}", unnamed);
    } else if (known_dtype) {
      what = fmt::format("{}, {}", dtype_name(static_cast<DType>(kind.dtype)), unnamed);
    } else {
      what = fmt::format("dtype code {}, {}", kind.dtype, unnamed);
    }
  } else if (kind.dtype == kRawBytes) {
    what = fmt::format("{} bytes", kind.count);
  } else if (known_dtype) {
    what = fmt::format("{}, {} elements", dtype_name(static_cast<DType>(kind.dtype)), kind.count);
  } else {
    what = fmt::format("dtype code {}, {} elements", kind.dtype, kind.count);
  }
  if (reduces(kind.op)) {
    what += kind.reduce <= static_cast<uint8_t>(ReduceOp::BXor)
                ? fmt::format(", {}", reduce_op_name(static_cast<ReduceOp>(kind.reduce)))
                : fmt::format(", reduce op code {}", kind.reduce);
  }
  if (rooted(kind.op)) what += fmt::format(", root {}", kind.root);
  return fmt::format("{}({})", message_op_name(kind.op), what);
}

std::exception_ptr message_mismatch(int rank, int peer, const Envelope& expected, size_t expected_bytes,
                                    const Envelope& got, size_t got_bytes) {
  const std::string op{message_op_name(expected.kind.op)};
  const bool p2p = expected.kind.op == MessageOp::P2P && got.kind.op == MessageOp::P2P;
  std::string detail;
  if (p2p) {
    detail = fmt::format("rank {} sent {} ({} bytes) but this rank receives {} ({} bytes)", peer,
                         describe(got.kind), got_bytes, describe(expected.kind), expected_bytes);
  } else {
    detail = fmt::format(
        "collectives do not match: rank {} called {} while this rank called {}; every member of a "
        "group must issue the same collectives in the same order with the same sizes",
        peer, describe(got.kind), describe(expected.kind));
  }
  const bool type_error = expected.kind.dtype != got.kind.dtype && expected.kind.op == got.kind.op;
  try {
    if (!p2p) {
      ErrorContext context = context_at(op, rank, peer, __FILE__, __LINE__);
      const CollectiveMismatch what{peer, got.kind};
      if (type_error) throw CollectiveMismatchError<TypeError>(std::move(detail), std::move(context), what);
      throw CollectiveMismatchError<ValueError>(std::move(detail), std::move(context), what);
    }
    if (type_error) THD_THROW_AT(TypeError, op, rank, peer, "{}", detail);
    THD_THROW_AT(ValueError, op, rank, peer, "{}", detail);
  } catch (...) {
    return std::current_exception();
  }
}

std::optional<CollectiveMismatch> collective_mismatch_of(const std::exception_ptr& error) noexcept {
  if (!error) return std::nullopt;
  try {
    std::rethrow_exception(error);
  } catch (const CollectiveMismatch& m) {
    return m;
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace thd::detail
