// sort and topk written into existing tensors (CPU tensors): the allocating ops'
// checks and line kernel, writing `values` and `indices` in place of new results.
// For a caller that keeps results' storage from one run of an op to the next (a
// worker's graph replays, docs/graphs.md).
//
// `values` (of the input's dtype) and `indices` (int64) must be contiguous, of the
// results' shape, on the CPU, and share no storage with the input or each other.
// Each returns true when it wrote both with the very values the allocating op would
// have made, and false, with nothing written, for anything else (a CUDA input, an
// empty result, a 0-dim input of topk): the caller then runs the op as usual. An
// input, a dim or a k the op refuses raises the op's error before anything is
// written.
#pragma once

#include <cstdint>

#include <thd/tensor.h>

namespace thd::detail {

bool sort_into(const Tensor& values, const Tensor& indices, const Tensor& a, int64_t dim, bool descending);
bool topk_into(const Tensor& values, const Tensor& indices, const Tensor& a, int64_t k, int64_t dim, bool largest,
               bool sorted);

}  // namespace thd::detail
