#include "datachannel/runtime_queries.h"

#include <cstdlib>
#include <memory>
#include <string_view>

#include "datachannel/channel_access.h"
#include "datachannel/channel_util.h"
#include "datachannel/check.h"
#include "datachannel/collective_launch.h"
#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/float32_accumulation.h"
#include "datachannel/collectives/reduce_kernels.h"
#include "datachannel/collectives/select.h"

namespace thd::detail {

namespace {

constexpr const char* kOp = "all_reduce";

}  // namespace

bool flagged_all_reduce_fits(DataChannel& channel, size_t count, DType dtype, ReduceOp op) {
  GroupState& g = state_of(channel);
  if (g.rank < 0 || g.size() < 2 || count == 0 || !g.transport || g.transport->host_collectives() != nullptr) {
    return false;
  }
  if (accumulates_in_float32(dtype, op)) return false;
  return choose_all_reduce(count * element_size(dtype), count, g.size()) == AllReduceAlgorithm::RecursiveDoubling;
}

bool flagged_all_reduce_prefers_rooted(DataChannel& channel) {
  GroupState& g = state_of(channel);
  if (g.size() < 3) return false;  // two members: the same two messages either way, one latency direct
  const char* form = std::getenv("THD_FLAGGED_ALL_REDUCE");
  const std::string_view choice = form != nullptr ? form : "auto";
  if (choice == "direct") return false;
  if (choice == "rooted") return true;
  if (choice != "auto") {
    THD_THROW_AT(ValueError, kOp, g.world_rank(), -1, "THD_FLAGGED_ALL_REDUCE must be auto, direct or rooted, not '{}'",
                 choice);
  }
  return g.transport && g.transport->oversubscribed();
}

std::vector<int64_t> flagged_all_reduce(DataChannel& channel, Tensor& tensor, ReduceOp op, int64_t word,
                                        const CollectiveOptions& options, bool rooted) {
  GroupState& g = state_of(channel);
  check_member(g, kOp);
  check_tensor(g, tensor, kOp, "the tensor", true);
  check_reduce_op(tensor.dtype(), op, kOp);
  const DType dtype = tensor.dtype();
  const auto count = static_cast<size_t>(tensor.numel());
  if (!flagged_all_reduce_fits(channel, count, dtype, op)) {
    THD_THROW_AT(ValueError, kOp, g.world_rank(), -1,
                 "a flagged all_reduce of {} {} elements does not follow this group's all_reduce order; use all_reduce",
                 count, dtype_name(dtype));
  }
  auto words = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(g.size()));
  void* data = tensor.data_ptr();
  // The rooted form names its root in the envelope: a member in the other form
  // is a kind mismatch, not a garbled exchange.
  const MessageKind kind{MessageOp::AllReduceFlagged, static_cast<uint8_t>(dtype), static_cast<uint8_t>(op),
                         rooted ? 0 : -1, static_cast<uint64_t>(count)};
  Request request = launch_collective(
      g, kind, options, {tensor},
      [=](Comm& c) {
        if (rooted) {
          flagged_rooted_all_reduce(c, data, count, dtype, op, word, words->data());
        } else {
          flagged_direct_all_reduce(c, data, count, dtype, op, word, words->data());
        }
      },
      true);
  request.wait();
  return *words;
}

}  // namespace thd::detail
