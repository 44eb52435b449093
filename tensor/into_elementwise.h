// Elementwise ops written into an existing tensor, beyond the flat path of
// tensor/into.h: broadcasting operands, operands that are not contiguous or not of
// the compute dtype, pow, comparisons, clamp, where and masked_fill, on the CPU and
// on a CUDA device. For a caller that keeps a result's storage from one run of an
// op to the next (a worker's graph replays, docs/graphs.md).
//
// `out` must be contiguous, of the broadcast shape, of the dtype the op's result
// has, on the operands' device, and share no storage with any operand. Each returns
// true when it wrote `out` with the very values the allocating op would have made,
// and false, with nothing written, for anything else: the caller then runs the op
// as usual (which also raises any error the op has).
#pragma once

#include <optional>

#include <thd/scalar.h>
#include <thd/tensor.h>

#include "tensor/into.h"

namespace thd::detail {

enum class IntoCompare { Eq, Ne, Lt, Le, Gt, Ge };

// out = a op b (Maximum and minimum take a tensor only).
bool broadcast_into(IntoBinary op, const Tensor& out, const Tensor& a, const Tensor& b);
bool broadcast_into(IntoBinary op, const Tensor& out, const Tensor& a, const Scalar& b);
// out = a ** b. An integer pow on the CPU raises the allocating op's error for a
// negative exponent before writing anything (one of another dtype than the
// result's, and an integer pow on a GPU, return false).
bool pow_into(const Tensor& out, const Tensor& a, const Tensor& b);
bool pow_into(const Tensor& out, const Tensor& a, const Scalar& b);
// out (bool) = a op b.
bool compare_into(IntoCompare op, const Tensor& out, const Tensor& a, const Tensor& b);
bool compare_into(IntoCompare op, const Tensor& out, const Tensor& a, const Scalar& b);
// out = cond ? a : b.
bool where_into(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
// out = a limited to [lo, hi] (either may be absent, not both).
bool clamp_into(const Tensor& out, const Tensor& a, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi);
// out = a with the elements where mask is true set to value.
bool masked_fill_into(const Tensor& out, const Tensor& a, const Tensor& mask, const Scalar& value);

// Whether `out` may be written as the result of an op reading `inputs`: defined,
// contiguous, with elements, of `shape` and `dtype`, on `device`, and sharing storage
// with none of them.
bool writable_result(const Tensor& out, const Shape& shape, DType dtype, Device device,
                     std::initializer_list<const Tensor*> inputs);

}  // namespace thd::detail
