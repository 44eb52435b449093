// Comparisons (bool results), where and clamp.
#include <vector>

#include "tensor/check.h"
#include "tensor/compare_kernel.h"
#include "tensor/cuda/elementwise_kernels.h"
#include "tensor/elementwise.h"
#include "tensor/functors/compare.h"
#include "tensor/into_elementwise.h"

namespace thd {
namespace {

using namespace detail;

using functors::EqOp;
using functors::GeOp;
using functors::GtOp;
using functors::LeOp;
using functors::LtOp;
using functors::NeOp;

template <typename Op>
Tensor compare(const char* op, const Tensor& a, const Tensor& b, DType compute) {
  if (auto flat = plan_flat<2>({&a, &b}, compute, kBool)) {
    launch_compare<Op>(op, compute, *flat);
    return std::move(flat->out);
  }
  ElementwisePlan plan = plan_elementwise(op, {a, b}, compute, kBool);
  launch_compare<Op>(op, compute, plan);
  return plan.out;
}

// a op b on a CUDA device, b a tensor or a number.
template <typename Op>
Tensor compare_cuda(const char* op, const Tensor& a, const cuda::Operand& b, DType compute) {
  std::vector<Tensor> tensors{a};
  if (b.tensor() != nullptr) tensors.push_back(*b.tensor());
  ElementwisePlan plan = plan_elementwise(op, tensors, compute, kBool);
  const cuda::Operand pb = b.tensor() != nullptr ? cuda::Operand(plan.inputs[1]) : b;
  cuda::compare_op<Op>(op, compute, plan.out, plan.inputs[0], pb);
  return plan.out;
}

template <typename Op>
Tensor compare(const char* op, const Tensor& a, const Tensor& b) {
  check_data(a, op, "self");
  check_data(b, op, "other");
  const DType c = result_type(a, b);
  if (on_cuda(op, a)) {
    if constexpr (kWithCuda) return compare_cuda<Op>(op, a, b, c);
  }
  return compare<Op>(op, a, b, c);
}

template <typename Op>
Tensor compare(const char* op, const Tensor& a, const Scalar& b) {
  check_data(a, op, "self");
  DType c = result_type(a, b);
  if (on_cuda(op, a)) {
    if constexpr (kWithCuda) return compare_cuda<Op>(op, a, b, c);
  }
  return compare<Op>(op, a, scalar_tensor(b, c), c);
}

// The dtype a Python number takes part in promotion as.
DType wrapped_dtype(const Scalar& s) {
  return s.is_floating_point() ? kFloat32 : s.is_integral() ? kInt64 : kBool;
}

// Into a new tensor, or into *target: self itself for clamp_, a kept result for
// clamp_into (which has checked that it can be the result).
Tensor clamp_impl(const char* op, const Tensor& self, const std::optional<Scalar>& lo,
                  const std::optional<Scalar>& hi, const Tensor* target) {
  check_data(self, op);
  THD_CHECK(lo.has_value() || hi.has_value(), ValueError, op,
            "at least one of 'min' or 'max' must not be None");
  if (!dtype_in(self.dtype(), kNumericSet)) throw_unsupported_dtype(op, self.dtype(), kNumericSet);
  DType c = self.dtype();
  if (lo) c = combine_categories(c, wrapped_dtype(*lo));
  if (hi) c = combine_categories(c, wrapped_dtype(*hi));
  if (on_cuda(op, self)) {
    if constexpr (kWithCuda) {
      ElementwisePlan plan = plan_elementwise(op, {self}, c, c, target);
      cuda::clamp(op, c, plan.out, plan.inputs[0], lo, hi);
      return plan.finish();
    }
  }
  auto launch = [&](const auto& plan) {
    dispatch<kNumericSet>(c, op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      // Bounds are rounded to the compute dtype first, as torch does.
      const functors::ClampOp<C> clamp{lo ? C(scalar_to<T>(*lo)) : C(0),
                                       hi ? C(scalar_to<T>(*hi)) : C(0), lo.has_value(),
                                       hi.has_value()};
      unary_kernel<T, T>(plan, clamp);
    });
  };
  if (auto flat = plan_flat<1>({&self}, c, c, target)) {
    launch(*flat);
    return target != nullptr ? *target : std::move(flat->out);
  }
  ElementwisePlan plan = plan_elementwise(op, {self}, c, c, target);
  launch(plan);
  return plan.finish();
}

}  // namespace

Tensor Tensor::eq(const Tensor& o) const { return compare<EqOp>("eq", *this, o); }
Tensor Tensor::eq(Scalar o) const { return compare<EqOp>("eq", *this, o); }
Tensor Tensor::ne(const Tensor& o) const { return compare<NeOp>("ne", *this, o); }
Tensor Tensor::ne(Scalar o) const { return compare<NeOp>("ne", *this, o); }
Tensor Tensor::lt(const Tensor& o) const { return compare<LtOp>("lt", *this, o); }
Tensor Tensor::lt(Scalar o) const { return compare<LtOp>("lt", *this, o); }
Tensor Tensor::le(const Tensor& o) const { return compare<LeOp>("le", *this, o); }
Tensor Tensor::le(Scalar o) const { return compare<LeOp>("le", *this, o); }
Tensor Tensor::gt(const Tensor& o) const { return compare<GtOp>("gt", *this, o); }
Tensor Tensor::gt(Scalar o) const { return compare<GtOp>("gt", *this, o); }
Tensor Tensor::ge(const Tensor& o) const { return compare<GeOp>("ge", *this, o); }
Tensor Tensor::ge(Scalar o) const { return compare<GeOp>("ge", *this, o); }

Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return clamp_impl("clamp", *this, min, max, nullptr);
}

Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  clamp_impl("clamp_", *this, min, max, this);
  return *this;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_data(cond, "where", "condition");
  check_data(a, "where", "self");
  check_data(b, "where", "other");
  THD_CHECK(cond.dtype() == kBool, TypeError, "where",
            "condition must be a bool tensor, got {}", cond.dtype());
  const DType c = result_type(a, b);
  ElementwisePlan plan = plan_elementwise("where", {cond, a, b}, {kBool, c, c}, c);
  if (on_cuda("where", plan.out)) {
    if constexpr (kWithCuda) {
      cuda::where(plan.out, plan.inputs[0], plan.inputs[1], plan.inputs[2]);
      return plan.out;
    }
  }
  dispatch_all(c, "where", [&](auto tag) {
    using T = typename decltype(tag)::type;
    nary_kernel<4>({&plan.out, &plan.inputs[0], &plan.inputs[1], &plan.inputs[2]}, [](char** p) {
      *reinterpret_cast<T*>(p[0]) = functors::WhereOp{}(*reinterpret_cast<const bool*>(p[1]),
                                                        *reinterpret_cast<const T*>(p[2]),
                                                        *reinterpret_cast<const T*>(p[3]));
    });
  });
  return plan.out;
}

Tensor where(const Tensor& cond, Scalar a, Scalar b) {
  check_data(cond, "where", "condition");
  // Two Python numbers: the result has their promoted dtype (float32 for floats).
  DType c = promote_types(wrapped_dtype(a), wrapped_dtype(b));
  if (on_cuda("where", cond)) {
    if constexpr (kWithCuda) {
      THD_CHECK(cond.dtype() == kBool, TypeError, "where",
                "condition must be a bool tensor, got {}", cond.dtype());
      ElementwisePlan plan = plan_elementwise("where", {cond}, kBool, c);
      cuda::where(plan.out, plan.inputs[0], a, b);
      return plan.out;
    }
  }
  return where(cond, detail::scalar_tensor(a, c), detail::scalar_tensor(b, c));
}

namespace detail {

bool clamp_into(const Tensor& out, const Tensor& a, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  if (!a.defined() || (!lo && !hi) || !dtype_in(a.dtype(), kNumericSet)) return false;
  DType c = a.dtype();
  if (lo) c = combine_categories(c, wrapped_dtype(*lo));
  if (hi) c = combine_categories(c, wrapped_dtype(*hi));
  if (!writable_result(out, a.shape(), c, a.device(), {&a})) return false;
  clamp_impl("clamp", a, lo, hi, &out);
  return true;
}

}  // namespace detail

}  // namespace thd
