// arange, linspace and eye written into an existing tensor (CPU tensors): the
// allocating ops' checks and fills, writing `out` in place of a new tensor. For a
// caller that keeps a result's storage from one run of an op to the next (a
// worker's graph replays, docs/graphs.md).
//
// `out` must be contiguous, of the result's shape and dtype, and on the CPU. Each
// returns true when it wrote `out` with the very values the allocating op would
// have made, and false, with nothing written, for anything else (an empty result
// among them): the caller then runs the op as usual. Arguments the op refuses raise
// the op's error before anything is written.
#pragma once

#include <cstdint>
#include <optional>

#include <thd/scalar.h>
#include <thd/tensor.h>

namespace thd::detail {

bool arange_into(const Tensor& out, const Scalar& start, const Scalar& end, const Scalar& step,
                 std::optional<DType> dtype);
bool linspace_into(const Tensor& out, const Scalar& start, const Scalar& end, int64_t steps, DType dtype);
// m < 0: an n x n identity.
bool eye_into(const Tensor& out, int64_t n, int64_t m, DType dtype);

}  // namespace thd::detail
