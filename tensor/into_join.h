// cat and stack written into an existing tensor (CPU tensors): the allocating ops'
// checks and copies, each input into its slot of `out` in place of a new result.
// For a caller that keeps a result's storage from one run of an op to the next (a
// worker's graph replays, docs/graphs.md).
//
// `out` must be contiguous, of the result's shape and of the inputs' promoted
// dtype, on the CPU, and share no storage with any input. Returns true when it wrote
// `out` with the very values the allocating op would have made, and false, with
// nothing written, for anything else (CUDA inputs, an empty result): the caller
// then runs the op as usual. Inputs the op refuses raise the op's error before
// anything is written.
#pragma once

#include <cstdint>
#include <vector>

#include <thd/tensor.h>

namespace thd::detail {

enum class IntoJoin { Cat, Stack };

bool join_into(IntoJoin kind, const Tensor& out, const std::vector<Tensor>& tensors, int64_t dim);

}  // namespace thd::detail
