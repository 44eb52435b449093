// Elementwise ops written into an existing tensor instead of a new one, for a
// caller that keeps a result's storage from one run of an op to the next (a
// worker's graph replays, docs/graphs.md). `out` must be contiguous, of the
// operands' shape, of the result dtype and on their device, sharing no storage
// with them. binary_into takes only the flat path: CPU operands, contiguous, of one
// shape (0-dim ones read as scalars) and already of the op's compute dtype
// (tensor/into_elementwise.h takes the other cases); unary_into takes any input,
// strided or of another dtype, on the CPU or a GPU. Each returns true when it wrote
// `out`, and false, with nothing written, for anything else: the caller then runs
// the op as usual (which also raises any error the op has).
#pragma once

#include <thd/scalar.h>
#include <thd/tensor.h>

namespace thd::detail {

enum class IntoBinary { Add, Sub, Mul, Div, Maximum, Minimum };
enum class IntoUnary { Neg, Abs, Exp, Log, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Relu, Gelu };

// out = a op b. Maximum and minimum take a tensor only.
bool binary_into(IntoBinary op, const Tensor& out, const Tensor& a, const Tensor& b);
bool binary_into(IntoBinary op, const Tensor& out, const Tensor& a, const Scalar& b);
// out = op(a).
bool unary_into(IntoUnary op, const Tensor& out, const Tensor& a);

}  // namespace thd::detail
