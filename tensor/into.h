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

#include <array>
#include <cstdint>
#include <optional>

#include <thd/scalar.h>
#include <thd/tensor.h>

namespace thd::detail {

enum class IntoBinary { Add, Sub, Mul, Div, Maximum, Minimum };
enum class IntoUnary { Neg, Abs, Exp, Log, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Relu, Gelu };

// out = a op b. Maximum and minimum take a tensor only.
bool binary_into(IntoBinary op, const Tensor& out, const Tensor& a, const Tensor& b);
bool binary_into(IntoBinary op, const Tensor& out, const Tensor& a, const Scalar& b);
// What binary_into(op, out, a, b) works out before it runs its kernel: where the
// flat run starts (out, a, b), bytes per element, the element count and the typed
// kernel. It stays right for as long as the three tensors keep their storages and
// layouts, so a caller that sees them unchanged runs it again without planning
// (a worker's graph replays, worker/kept_plans.h).
struct FlatBinary {
  std::array<char*, 3> base;  // base[2] unused for a number b, which `scalar` holds
  std::array<int64_t, 3> step;
  int64_t numel;
  void (*kernel)(const FlatBinary&);
  // A number b as the compute dtype's value (the kernel reads it from here, so a
  // copy of the plan runs as the original).
  alignas(16) std::array<unsigned char, 16> scalar;

  void run() const { kernel(*this); }
};
// The plan binary_into(op, out, a, b) runs, without running it; nullopt when
// binary_into would return false.
std::optional<FlatBinary> plan_binary_into(IntoBinary op, const Tensor& out, const Tensor& a, const Tensor& b);
std::optional<FlatBinary> plan_binary_into(IntoBinary op, const Tensor& out, const Tensor& a, const Scalar& b);

// out = op(a).
bool unary_into(IntoUnary op, const Tensor& out, const Tensor& a);

}  // namespace thd::detail
