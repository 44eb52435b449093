#include "datachannel/runtime_queries.h"

#include <memory>

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

std::vector<int64_t> flagged_all_reduce(DataChannel& channel, Tensor& tensor, ReduceOp op, int64_t word,
                                        const CollectiveOptions& options) {
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
  const MessageKind kind{MessageOp::AllReduceFlagged, static_cast<uint8_t>(dtype), static_cast<uint8_t>(op), -1,
                         static_cast<uint64_t>(count)};
  Request request = launch_collective(
      g, kind, options, {tensor},
      [=](Comm& c) { flagged_direct_all_reduce(c, data, count, dtype, op, word, words->data()); }, true);
  request.wait();
  return *words;
}

}  // namespace thd::detail
