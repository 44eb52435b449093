// Comparisons (bool results), where and clamp.
#include "tensor/check.h"
#include "tensor/elementwise.h"

namespace thd {
namespace {

using namespace detail;

struct EqOp {
  template <typename C> bool operator()(C a, C b) const { return a == b; }
};
struct NeOp {
  template <typename C> bool operator()(C a, C b) const { return a != b; }
};
struct LtOp {
  template <typename C> bool operator()(C a, C b) const { return a < b; }
};
struct LeOp {
  template <typename C> bool operator()(C a, C b) const { return a <= b; }
};
struct GtOp {
  template <typename C> bool operator()(C a, C b) const { return a > b; }
};
struct GeOp {
  template <typename C> bool operator()(C a, C b) const { return a >= b; }
};

template <typename Op, typename Plan>
void launch(const char* op, DType compute, const Plan& plan) {
  dispatch_all(compute, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_kernel<bool, T>(plan, Op{});
  });
}

template <typename Op>
Tensor compare(const char* op, const Tensor& a, const Tensor& b, DType compute) {
  if (auto flat = plan_flat<2>({&a, &b}, compute, kBool)) {
    launch<Op>(op, compute, *flat);
    return std::move(flat->out);
  }
  ElementwisePlan plan = plan_elementwise(op, {a, b}, compute, kBool);
  launch<Op>(op, compute, plan);
  return plan.out;
}

template <typename Op>
Tensor compare(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(a, op, "self");
  check_defined(b, op, "other");
  return compare<Op>(op, a, b, result_type(a, b));
}

template <typename Op>
Tensor compare(const char* op, const Tensor& a, const Scalar& b) {
  check_defined(a, op, "self");
  DType c = result_type(a, b);
  return compare<Op>(op, a, scalar_tensor(b, c), c);
}

// The dtype a Python number takes part in promotion as.
DType wrapped_dtype(const Scalar& s) {
  return s.is_floating_point() ? kFloat32 : s.is_integral() ? kInt64 : kBool;
}

Tensor clamp_impl(const char* op, const Tensor& self, const std::optional<Scalar>& lo,
                  const std::optional<Scalar>& hi, bool in_place) {
  check_defined(self, op);
  THD_CHECK(lo.has_value() || hi.has_value(), ValueError, op,
            "at least one of 'min' or 'max' must not be None");
  if (!dtype_in(self.dtype(), kNumericSet)) throw_unsupported_dtype(op, self.dtype(), kNumericSet);
  DType c = self.dtype();
  if (lo) c = combine_categories(c, wrapped_dtype(*lo));
  if (hi) c = combine_categories(c, wrapped_dtype(*hi));
  auto launch = [&](const auto& plan) {
    dispatch<kNumericSet>(c, op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const bool has_lo = lo.has_value(), has_hi = hi.has_value();
      // Bounds are rounded to the compute dtype first, as torch does.
      const C l = has_lo ? C(scalar_to<T>(*lo)) : C(0);
      const C h = has_hi ? C(scalar_to<T>(*hi)) : C(0);
      // NaN inputs stay NaN (both comparisons are false); min > max gives max.
      unary_kernel<T, T>(plan, [=](C x) {
        if (has_lo && x < l) x = l;
        if (has_hi && x > h) x = h;
        return x;
      });
    });
  };
  const Tensor* target = in_place ? &self : nullptr;
  if (auto flat = plan_flat<1>({&self}, c, c, target)) {
    launch(*flat);
    return in_place ? self : std::move(flat->out);
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
  return clamp_impl("clamp", *this, min, max, false);
}

Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  clamp_impl("clamp_", *this, min, max, true);
  return *this;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined(cond, "where", "condition");
  check_defined(a, "where", "self");
  check_defined(b, "where", "other");
  THD_CHECK(cond.dtype() == kBool, TypeError, "where",
            "condition must be a bool tensor, got {}", cond.dtype());
  const DType c = result_type(a, b);
  ElementwisePlan plan = plan_elementwise("where", {cond, a, b}, {kBool, c, c}, c);
  dispatch_all(c, "where", [&](auto tag) {
    using T = typename decltype(tag)::type;
    nary_kernel<4>({&plan.out, &plan.inputs[0], &plan.inputs[1], &plan.inputs[2]}, [](char** p) {
      *reinterpret_cast<T*>(p[0]) = *reinterpret_cast<const bool*>(p[1])
                                        ? *reinterpret_cast<const T*>(p[2])
                                        : *reinterpret_cast<const T*>(p[3]);
    });
  });
  return plan.out;
}

Tensor where(const Tensor& cond, Scalar a, Scalar b) {
  check_defined(cond, "where", "condition");
  // Two Python numbers: the result has their promoted dtype (float32 for floats).
  DType c = promote_types(wrapped_dtype(a), wrapped_dtype(b));
  return where(cond, detail::scalar_tensor(a, c), detail::scalar_tensor(b, c));
}

}  // namespace thd
