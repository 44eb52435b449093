// softmax and log_softmax written into an existing tensor (CPU tensors of a
// floating dtype): the allocating op's kernel, writing `out` in place of a new
// result. For a caller that keeps a result's storage from one run of an op to the
// next (a worker's graph replays, docs/graphs.md).
//
// `out` must be contiguous, of the input's shape and dtype, and share no storage
// with it. Returns true when it wrote `out` with the very values the allocating op
// would have made, and false, with nothing written, for anything else (a CUDA
// input among them): the caller then runs the op as usual. A dim the op refuses
// raises the op's error.
#pragma once

#include <cstdint>

#include <thd/tensor.h>

namespace thd::detail {

bool softmax_into(const Tensor& out, const Tensor& a, int64_t dim, bool log);

}  // namespace thd::detail
