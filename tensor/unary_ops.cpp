// Elementwise functions of one tensor: neg, abs, relu, and the floating-point math
// functions (exp ... gelu), which compute integer and bool inputs in float32.
#include "tensor/check.h"
#include "tensor/cuda/elementwise_kernels.h"
#include "tensor/elementwise.h"
#include "tensor/functors/unary.h"
#include "tensor/into.h"
#include "tensor/into_elementwise.h"

namespace thd {
namespace {

using namespace detail;

using functors::AbsOp;
using functors::CosOp;
using functors::ExpOp;
using functors::GeluOp;
using functors::LogOp;
using functors::NegOp;
using functors::ReluOp;
using functors::RsqrtOp;
using functors::SigmoidOp;
using functors::SinOp;
using functors::SqrtOp;
using functors::TanhOp;

// How an op treats dtypes: the math functions promote to floating point; the others
// keep the input dtype and accept the listed families.
template <typename Op>
constexpr bool promotes_to_float() {
  return Op::kFloatMath;
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

// The dtype Op computes in for an input of dtype `in`.
template <typename Op>
DType compute_dtype(DType in) {
  return promotes_to_float<Op>() && !is_floating_point(in) ? kFloat32 : in;
}

// Runs Op's typed kernel over operands laid out by plan_flat or plan_elementwise.
template <typename Op, typename Plan>
void launch(const char* op, DType compute, const Plan& plan) {
  dispatch<functors::unary_dtypes_v<Op>>(compute, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unary_kernel<T, T>(plan, Op{});
  });
}

// Op(self) on a CUDA device, into a new tensor or into *target.
template <typename Op>
Tensor run_cuda(const char* op, const Tensor& self, DType compute, const Tensor* target) {
  ElementwisePlan plan = plan_elementwise(op, {self}, compute, compute, target);
  cuda::unary_op<Op>(op, compute, plan.out, plan.inputs[0]);
  return plan.finish();
}

// Op(self) into a new tensor.
template <typename Op>
Tensor run(const char* op, const Tensor& self) {
  check_data(self, op);
  check_dtype<Op>(op, self.dtype());
  const DType c = compute_dtype<Op>(self.dtype());
  if (on_cuda(op, self)) {
    if constexpr (kWithCuda) return run_cuda<Op>(op, self, c, nullptr);
  }
  if (auto flat = plan_flat<1>({&self}, c, c)) {
    launch<Op>(op, c, *flat);
    return std::move(flat->out);
  }
  ElementwisePlan plan = plan_elementwise(op, {self}, c, c);
  launch<Op>(op, c, plan);
  return plan.finish();
}

// self = Op(self).
template <typename Op>
Tensor& run_inplace(const char* op, Tensor& self) {
  check_data(self, op);
  check_dtype<Op>(op, self.dtype());
  const DType c = compute_dtype<Op>(self.dtype());
  if (on_cuda(op, self)) {
    if constexpr (kWithCuda) {
      run_cuda<Op>(op, self, c, &self);
      return self;
    }
  }
  if (auto flat = plan_flat<1>({&self}, c, c, &self)) {
    launch<Op>(op, c, *flat);
    return self;
  }
  ElementwisePlan plan = plan_elementwise(op, {self}, c, c, &self);
  launch<Op>(op, c, plan);
  plan.finish();
  return self;
}

// Op(self) into `out` (tensor/into.h): the flat path, the general one for strided
// inputs and inputs of another dtype, or the CUDA kernel.
template <typename Op>
bool into(const char* op, const Tensor& out, const Tensor& self) {
  if (!out.defined() || !self.defined()) return false;
  if constexpr (std::is_same_v<Op, NegOp>) {
    if (self.dtype() == kBool) return false;
  }
  const DType c = compute_dtype<Op>(self.dtype());
  if (!dtype_in(c, functors::unary_dtypes_v<Op>)) return false;
  if (!writable_result(out, self.shape(), c, self.device(), {&self})) return false;
  if (on_cuda(op, self)) {
    if constexpr (kWithCuda) {
      run_cuda<Op>(op, self, c, &out);
      return true;
    }
  }
  if (auto flat = plan_flat<1>({&self}, c, c, &out)) {
    launch<Op>(op, c, *flat);
    return true;
  }
  launch<Op>(op, c, plan_elementwise(op, {self}, c, c, &out));
  return true;
}

}  // namespace

Tensor Tensor::neg() const { return run<NegOp>("neg", *this); }
Tensor& Tensor::neg_() { return run_inplace<NegOp>("neg_", *this); }
Tensor Tensor::abs() const { return run<AbsOp>("abs", *this); }
Tensor& Tensor::abs_() { return run_inplace<AbsOp>("abs_", *this); }
Tensor Tensor::relu() const { return run<ReluOp>("relu", *this); }
Tensor& Tensor::relu_() { return run_inplace<ReluOp>("relu_", *this); }
Tensor Tensor::exp() const { return run<ExpOp>("exp", *this); }
Tensor& Tensor::exp_() { return run_inplace<ExpOp>("exp_", *this); }
Tensor Tensor::log() const { return run<LogOp>("log", *this); }
Tensor& Tensor::log_() { return run_inplace<LogOp>("log_", *this); }
Tensor Tensor::sqrt() const { return run<SqrtOp>("sqrt", *this); }
Tensor& Tensor::sqrt_() { return run_inplace<SqrtOp>("sqrt_", *this); }
Tensor Tensor::rsqrt() const { return run<RsqrtOp>("rsqrt", *this); }
Tensor& Tensor::rsqrt_() { return run_inplace<RsqrtOp>("rsqrt_", *this); }
Tensor Tensor::sin() const { return run<SinOp>("sin", *this); }
Tensor& Tensor::sin_() { return run_inplace<SinOp>("sin_", *this); }
Tensor Tensor::cos() const { return run<CosOp>("cos", *this); }
Tensor& Tensor::cos_() { return run_inplace<CosOp>("cos_", *this); }
Tensor Tensor::tanh() const { return run<TanhOp>("tanh", *this); }
Tensor& Tensor::tanh_() { return run_inplace<TanhOp>("tanh_", *this); }
Tensor Tensor::sigmoid() const { return run<SigmoidOp>("sigmoid", *this); }
Tensor& Tensor::sigmoid_() { return run_inplace<SigmoidOp>("sigmoid_", *this); }
Tensor Tensor::gelu() const { return run<GeluOp>("gelu", *this); }
Tensor& Tensor::gelu_() { return run_inplace<GeluOp>("gelu_", *this); }

namespace detail {

bool unary_into(IntoUnary op, const Tensor& out, const Tensor& a) {
  switch (op) {
    case IntoUnary::Neg: return into<NegOp>("neg", out, a);
    case IntoUnary::Abs: return into<AbsOp>("abs", out, a);
    case IntoUnary::Exp: return into<ExpOp>("exp", out, a);
    case IntoUnary::Log: return into<LogOp>("log", out, a);
    case IntoUnary::Sqrt: return into<SqrtOp>("sqrt", out, a);
    case IntoUnary::Rsqrt: return into<RsqrtOp>("rsqrt", out, a);
    case IntoUnary::Sin: return into<SinOp>("sin", out, a);
    case IntoUnary::Cos: return into<CosOp>("cos", out, a);
    case IntoUnary::Tanh: return into<TanhOp>("tanh", out, a);
    case IntoUnary::Sigmoid: return into<SigmoidOp>("sigmoid", out, a);
    case IntoUnary::Relu: return into<ReluOp>("relu", out, a);
    case IntoUnary::Gelu: return into<GeluOp>("gelu", out, a);
  }
  return false;
}

}  // namespace detail

}  // namespace thd
