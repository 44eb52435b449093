// Elementwise functions of one tensor: neg, abs, relu, and the floating-point math
// functions (exp ... gelu), which compute integer and bool inputs in float32.
#include <cmath>

#include "tensor/check.h"
#include "tensor/elementwise.h"
#include "tensor/int_math.h"

namespace thd {
namespace {

using namespace detail;

struct NegOp {
  template <typename C>
  C operator()(C x) const {
    return wrapping_neg(x);
  }
};
struct AbsOp {
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) return x;
    else if constexpr (std::is_floating_point_v<C>) return std::abs(x);
    else return x < 0 ? wrapping_neg(x) : x;
  }
};
struct ReluOp {
  template <typename C>
  C operator()(C x) const {
    return x > C(0) ? x : (x != x ? x : C(0));  // NaN stays NaN
  }
};
struct ExpOp {
  template <typename C>
  C operator()(C x) const { return std::exp(x); }
};
struct LogOp {
  template <typename C>
  C operator()(C x) const { return std::log(x); }
};
struct SqrtOp {
  template <typename C>
  C operator()(C x) const { return std::sqrt(x); }
};
struct RsqrtOp {
  template <typename C>
  C operator()(C x) const { return C(1) / std::sqrt(x); }
};
struct SinOp {
  template <typename C>
  C operator()(C x) const { return std::sin(x); }
};
struct CosOp {
  template <typename C>
  C operator()(C x) const { return std::cos(x); }
};
struct TanhOp {
  template <typename C>
  C operator()(C x) const { return std::tanh(x); }
};
struct SigmoidOp {
  template <typename C>
  C operator()(C x) const { return C(1) / (C(1) + std::exp(-x)); }
};
// The exact form, x * Phi(x), as torch's default approximate='none'.
struct GeluOp {
  template <typename C>
  C operator()(C x) const {
    return C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752440)));
  }
};

// How an op treats dtypes: the math functions promote to floating point; the others
// keep the input dtype and accept the listed families.
template <typename Op>
constexpr bool promotes_to_float() {
  return !(std::is_same_v<Op, NegOp> || std::is_same_v<Op, AbsOp> || std::is_same_v<Op, ReluOp>);
}

template <typename Op>
void check_dtype(const char* op, DType dtype) {
  if constexpr (std::is_same_v<Op, NegOp>) {
    THD_CHECK(dtype != kBool, TypeError, op,
              "negation, the `-` operator, on a bool tensor is not supported; to invert a "
              "mask use logical_not() or the `~` operator");
  }
  if constexpr (!promotes_to_float<Op>()) {
    if (!dtype_in(dtype, kNumericSet)) throw_unsupported_dtype(op, dtype, kNumericSet);
  }
}

template <typename Op>
Tensor run(const char* op, const Tensor& self, bool in_place) {
  check_defined(self, op);
  check_dtype<Op>(op, self.dtype());
  const DType c = promotes_to_float<Op>() && !is_floating_point(self.dtype()) ? kFloat32
                                                                              : self.dtype();
  ElementwisePlan plan = plan_elementwise(op, {self}, c, c, in_place ? &self : nullptr);
  constexpr unsigned allowed = promotes_to_float<Op>() ? kFloatingSet : kNumericSet;
  dispatch<allowed>(c, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unary_kernel<T, T>(plan.out, plan.inputs[0], Op{});
  });
  return plan.finish();
}

template <typename Op>
Tensor& run_inplace(const char* op, Tensor& self) {
  run<Op>(op, self, true);
  return self;
}

}  // namespace

Tensor Tensor::neg() const { return run<NegOp>("neg", *this, false); }
Tensor& Tensor::neg_() { return run_inplace<NegOp>("neg_", *this); }
Tensor Tensor::abs() const { return run<AbsOp>("abs", *this, false); }
Tensor& Tensor::abs_() { return run_inplace<AbsOp>("abs_", *this); }
Tensor Tensor::relu() const { return run<ReluOp>("relu", *this, false); }
Tensor& Tensor::relu_() { return run_inplace<ReluOp>("relu_", *this); }
Tensor Tensor::exp() const { return run<ExpOp>("exp", *this, false); }
Tensor& Tensor::exp_() { return run_inplace<ExpOp>("exp_", *this); }
Tensor Tensor::log() const { return run<LogOp>("log", *this, false); }
Tensor& Tensor::log_() { return run_inplace<LogOp>("log_", *this); }
Tensor Tensor::sqrt() const { return run<SqrtOp>("sqrt", *this, false); }
Tensor& Tensor::sqrt_() { return run_inplace<SqrtOp>("sqrt_", *this); }
Tensor Tensor::rsqrt() const { return run<RsqrtOp>("rsqrt", *this, false); }
Tensor& Tensor::rsqrt_() { return run_inplace<RsqrtOp>("rsqrt_", *this); }
Tensor Tensor::sin() const { return run<SinOp>("sin", *this, false); }
Tensor& Tensor::sin_() { return run_inplace<SinOp>("sin_", *this); }
Tensor Tensor::cos() const { return run<CosOp>("cos", *this, false); }
Tensor& Tensor::cos_() { return run_inplace<CosOp>("cos_", *this); }
Tensor Tensor::tanh() const { return run<TanhOp>("tanh", *this, false); }
Tensor& Tensor::tanh_() { return run_inplace<TanhOp>("tanh_", *this); }
Tensor Tensor::sigmoid() const { return run<SigmoidOp>("sigmoid", *this, false); }
Tensor& Tensor::sigmoid_() { return run_inplace<SigmoidOp>("sigmoid_", *this); }
Tensor Tensor::gelu() const { return run<GeluOp>("gelu", *this, false); }
Tensor& Tensor::gelu_() { return run_inplace<GeluOp>("gelu_", *this); }

}  // namespace thd
