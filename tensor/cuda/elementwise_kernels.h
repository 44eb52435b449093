// The CUDA kernels of the elementwise ops, as the op code (tensor/binary_ops.cpp,
// unary_ops.cpp, compare_ops.cpp) calls them once it has planned the op with
// plan_elementwise: dtypes promoted, inputs converted to the compute dtype, the output
// allocated (or the in-place target chosen), overlapping inputs copied. What is left
// here is running the functor of tensor/functors/ over the elements.
//
// Common contract: `out` is a CUDA tensor of the result dtype and of the broadcast
// shape; every tensor operand lives on out's device, has the compute dtype and
// broadcasts to out's shape, and either is out's exact view or shares no memory with
// it. Kernels run asynchronously on current_stream(out's device) (cuda_stream.h).
// `op` names the caller in errors.
#pragma once

#include <optional>

#include <thd/tensor.h>

#include "tensor/functors/binary.h"
#include "tensor/functors/compare.h"
#include "tensor/functors/unary.h"

namespace thd::cuda {

// One input of an elementwise kernel: a CUDA tensor, or a number every element
// reads. A number goes to the kernel by value, converted to the compute dtype as the
// CPU converts it (scalar_to), never through a 0-dim tensor.
class Operand {
 public:
  Operand(const Tensor& tensor) : tensor_(&tensor) {}  // NOLINT: either kind reads naturally
  Operand(const Scalar& value) : value_(value) {}      // NOLINT

  // nullptr for a number.
  const Tensor* tensor() const { return tensor_; }
  const Scalar& value() const { return value_; }

 private:
  const Tensor* tensor_ = nullptr;
  Scalar value_;
};

// out = Op(in), computed in `dtype` (out's and in's dtype). Op: a functor of
// functors/unary.h.
template <typename Op>
void unary_op(const char* op, DType dtype, const Tensor& out, const Tensor& in);

// out = Op(a, b), computed in `compute` (out's dtype). Op: a functor of
// functors/binary.h. At most one of a and b is a number.
template <typename Op>
void binary_op(const char* op, DType compute, const Tensor& out, const Operand& a,
               const Operand& b);

// out (bool) = Op(a, b) with a and b read as `compute`. Op: a comparison of
// functors/compare.h. At most one of a and b is a number.
template <typename Op>
void compare_op(const char* op, DType compute, const Tensor& out, const Operand& a,
                const Operand& b);

// out = in limited to [lo, hi] (either may be absent, not both); the bounds are
// rounded to `dtype` first, as on the CPU.
void clamp(const char* op, DType dtype, const Tensor& out, const Tensor& in,
           const std::optional<Scalar>& lo, const std::optional<Scalar>& hi);

// out = cond ? a : b with cond a bool tensor and a, b of out's dtype (tensors or
// numbers).
void where(const Tensor& out, const Tensor& cond, const Operand& a, const Operand& b);

// Whether any element of t (a CUDA tensor of an integer dtype) is negative: the check
// of integer pow's exponent. Waits for t's stream, as it must to answer.
bool has_negative(const char* op, const Tensor& t);

}  // namespace thd::cuda
