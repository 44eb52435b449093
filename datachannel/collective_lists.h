// The list forms of the collectives (torch.distributed's all_gather(tensor_list,
// tensor), gather(tensor, gather_list), scatter(tensor, scatter_list),
// reduce_scatter(output, input_list), all_to_all(output_list, input_list),
// all_to_all_single with split sizes), for the process-group free functions.
//
// Each is one collective on the group's (group, tag) sequence, issued as the
// flat forms are: checks on the calling rank first (a wrong list length, dtype or
// size fails with a ValueError naming the list and the position), then the
// algorithm over staging buffers on the tag's queue, and the outputs written
// before its request completes. Host tensors only; outputs must be contiguous.
// Roots are group ranks here (the free functions translate global ones).
#pragma once

#include <cstdint>
#include <vector>

#include <thd/datachannel.h>

namespace thd::detail {

struct GroupState;

// outputs[i] receives rank i's input; sizes may differ between ranks (each rank's
// size is exchanged first, and an output of the wrong size fails after the
// exchange, on the rank that gave it, so no rank is left waiting).
Request all_gather_list(GroupState& g, const std::vector<Tensor>& outputs, const Tensor& input,
                        const CollectiveOptions& o, bool blocking);
// outputs (root only; empty elsewhere): one per rank, each of input's size.
Request gather_list(GroupState& g, const Tensor& input, const std::vector<Tensor>& outputs, int root,
                    const CollectiveOptions& o, bool blocking);
// inputs (root only; empty elsewhere): one per rank, each of output's size.
Request scatter_list(GroupState& g, const Tensor& output, const std::vector<Tensor>& inputs, int root,
                     const CollectiveOptions& o, bool blocking);
// inputs: one per rank, each of output's size; output = the op over every rank's inputs[rank].
Request reduce_scatter_list(GroupState& g, const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                            const CollectiveOptions& o, bool blocking);
// inputs[j] goes to rank j, which receives it as its outputs[rank]; sizes may
// differ (a receive of another size than was sent fails naming both).
Request all_to_all_list(GroupState& g, const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                        const CollectiveOptions& o, bool blocking);
// Rows (dim 0) of input split by input_splits go to the ranks in order; rows of
// output split by output_splits come from them. An empty split list: equal parts.
Request all_to_all_single(GroupState& g, const Tensor& output, const Tensor& input,
                          const std::vector<int64_t>& output_splits, const std::vector<int64_t>& input_splits,
                          const CollectiveOptions& o, bool blocking);

}  // namespace thd::detail
