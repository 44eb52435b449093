// index_select and gather written into an existing tensor (CPU tensors): the
// allocating ops' checks and kernel, writing `out` in place of a new result. For a
// caller that keeps a result's storage from one run of an op to the next (a
// worker's graph replays, docs/graphs.md).
//
// `out` must be contiguous, of the result's shape and of the input's dtype, on the
// CPU, and share no storage with the input or the index. Returns true when it wrote
// `out` with the very values the allocating op would have made, and false, with
// nothing written, for anything else (a CUDA input, a 0-dim input of index_select):
// the caller then runs the op as usual. An index, a dim or a shape the op refuses
// raises the op's error before anything is written.
#pragma once

#include <cstdint>

#include <thd/tensor.h>

namespace thd::detail {

enum class IntoIndex { IndexSelect, Gather };

bool index_into(IntoIndex kind, const Tensor& out, const Tensor& a, int64_t dim, const Tensor& index);

}  // namespace thd::detail
