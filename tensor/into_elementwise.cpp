#include "tensor/into_elementwise.h"

#include <optional>
#include <type_traits>

#include "tensor/check.h"
#include "tensor/compare_kernel.h"
#include "tensor/cuda/elementwise_kernels.h"
#include "tensor/elementwise.h"
#include "tensor/functors/binary.h"
#include "tensor/functors/compare.h"
#include "tensor/into_binary_ops.h"
#include "tensor/pow_exponent.h"

namespace thd::detail {

namespace {

using functors::DivOp;
using functors::PowOp;
using functors::SubOp;

// The broadcast of `shapes`; nullopt when they do not broadcast (the allocating op
// then raises the error).
std::optional<Shape> broadcast_of(std::initializer_list<const Shape*> shapes) {
  Shape out;
  for (const Shape* s : shapes) {
    const size_t nd = std::max(out.size(), s->size());
    Shape next(nd);
    for (size_t i = 0; i < nd; ++i) {
      const int64_t x = i < nd - out.size() ? 1 : out[i - (nd - out.size())];
      const int64_t y = i < nd - s->size() ? 1 : (*s)[i - (nd - s->size())];
      if (x != y && x != 1 && y != 1) return std::nullopt;
      next[i] = x == 1 ? y : x;
    }
    out = std::move(next);
  }
  return out;
}

// The dtype the arithmetic op computes in (and writes), given the promoted dtype;
// nullopt for a dtype the op refuses (the allocating op raises that).
template <typename Op>
std::optional<DType> arith_dtype(DType promoted) {
  DType c = promoted;
  if constexpr (std::is_same_v<Op, DivOp>) c = is_floating_point(promoted) ? promoted : kFloat32;
  if constexpr (std::is_same_v<Op, SubOp>) {
    if (c == kBool) return std::nullopt;
  }
  if (!dtype_in(c, Op::kDTypes)) return std::nullopt;
  return c;
}

template <typename Op, typename Plan>
void launch_arith(const char* op, DType c, const Plan& plan) {
  dispatch<Op::kDTypes>(c, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_kernel<T, T>(plan, Op{});
  });
}

// An integer pow checks its exponent's signs before writing, as the allocating op
// does: on the CPU, for an exponent of the compute dtype (one of another dtype is
// checked after its conversion, which the allocating op makes). False when the
// caller is to run the allocating op instead.
template <typename Op>
bool exponent_checked(const Tensor& a, DType c, const Tensor* exponent, const Scalar* value) {
  if constexpr (std::is_same_v<Op, PowOp>) {
    if (!is_integral(c)) return true;
    if (!a.device().is_cpu()) return false;
    if (exponent != nullptr) {
      if (exponent->dtype() != c) return false;
      check_integer_exponent(*exponent, c);
    } else {
      check_integer_exponent(*value, c);
    }
  }
  return true;
}

template <typename Op>
bool arith_into(const char* op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return false;
  const auto c = arith_dtype<Op>(result_type(a, b));
  if (!c) return false;
  const auto shape = broadcast_of({&a.shape(), &b.shape()});
  if (!shape || !writable_result(out, *shape, *c, a.device(), {&a, &b}) || b.device() != a.device()) return false;
  if (!exponent_checked<Op>(a, *c, &b, nullptr)) return false;
  if (on_cuda(op, a)) {
    if constexpr (kWithCuda) {
      ElementwisePlan plan = plan_elementwise(op, {a, b}, *c, *c, &out);
      cuda::binary_op<Op>(op, *c, plan.out, plan.inputs[0], plan.inputs[1]);
      return true;
    }
  }
  if (auto flat = plan_flat<2>({&a, &b}, *c, *c, &out)) {
    launch_arith<Op>(op, *c, *flat);
    return true;
  }
  launch_arith<Op>(op, *c, plan_elementwise(op, {a, b}, *c, *c, &out));
  return true;
}

// With a number: read as the compute dtype, as the allocating op's 0-dim tensor of
// that dtype holding it is read.
template <typename Op>
bool arith_into(const char* op, const Tensor& out, const Tensor& a, const Scalar& b) {
  if (!a.defined()) return false;
  const auto c = arith_dtype<Op>(result_type(a, b));
  if (!c || !writable_result(out, a.shape(), *c, a.device(), {&a})) return false;
  if (!exponent_checked<Op>(a, *c, nullptr, &b)) return false;
  if (on_cuda(op, a)) {
    if constexpr (kWithCuda) {
      ElementwisePlan plan = plan_elementwise(op, {a}, *c, *c, &out);
      cuda::binary_op<Op>(op, *c, plan.out, plan.inputs[0], b);
      return true;
    }
  }
  if (auto flat = plan_flat<1>({&a}, *c, *c, &out)) {
    dispatch<Op::kDTypes>(*c, op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      binary_kernel<T, T>(*flat, scalar_to<T>(b), Op{});
    });
    return true;
  }
  launch_arith<Op>(op, *c, plan_elementwise(op, {a, scalar_tensor(b, *c)}, *c, *c, &out));
  return true;
}

template <typename Op>
bool compare_op_into(const char* op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || b.device() != a.device()) return false;
  const DType c = result_type(a, b);
  const auto shape = broadcast_of({&a.shape(), &b.shape()});
  if (!shape || !writable_result(out, *shape, kBool, a.device(), {&a, &b})) return false;
  if (on_cuda(op, a)) {
    if constexpr (kWithCuda) {
      ElementwisePlan plan = plan_elementwise(op, {a, b}, c, kBool, &out);
      cuda::compare_op<Op>(op, c, plan.out, plan.inputs[0], plan.inputs[1]);
      return true;
    }
  }
  if (auto flat = plan_flat<2>({&a, &b}, c, kBool, &out)) {
    launch_compare<Op>(op, c, *flat);
    return true;
  }
  launch_compare<Op>(op, c, plan_elementwise(op, {a, b}, c, kBool, &out));
  return true;
}

template <typename Op>
bool compare_op_into(const char* op, const Tensor& out, const Tensor& a, const Scalar& b) {
  if (!a.defined()) return false;
  const DType c = result_type(a, b);
  if (!writable_result(out, a.shape(), kBool, a.device(), {&a})) return false;
  if (on_cuda(op, a)) {
    if constexpr (kWithCuda) {
      ElementwisePlan plan = plan_elementwise(op, {a}, c, kBool, &out);
      cuda::compare_op<Op>(op, c, plan.out, plan.inputs[0], b);
      return true;
    }
  }
  if (auto flat = plan_flat<1>({&a}, c, kBool, &out)) {
    dispatch_all(c, op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      binary_kernel<bool, T>(*flat, scalar_to<T>(b), Op{});
    });
    return true;
  }
  launch_compare<Op>(op, c, plan_elementwise(op, {a, scalar_tensor(b, c)}, c, kBool, &out));
  return true;
}

template <typename B>
bool compare_dispatch(IntoCompare op, const Tensor& out, const Tensor& a, const B& b) {
  switch (op) {
    case IntoCompare::Eq: return compare_op_into<functors::EqOp>("eq", out, a, b);
    case IntoCompare::Ne: return compare_op_into<functors::NeOp>("ne", out, a, b);
    case IntoCompare::Lt: return compare_op_into<functors::LtOp>("lt", out, a, b);
    case IntoCompare::Le: return compare_op_into<functors::LeOp>("le", out, a, b);
    case IntoCompare::Gt: return compare_op_into<functors::GtOp>("gt", out, a, b);
    case IntoCompare::Ge: return compare_op_into<functors::GeOp>("ge", out, a, b);
  }
  return false;
}

// The CUDA where, reached from a template so that a build without CUDA never
// names it.
template <bool kCuda>
void where_on_device(const ElementwisePlan& plan) {
  if constexpr (kCuda) cuda::where(plan.out, plan.inputs[0], plan.inputs[1], plan.inputs[2]);
}

}  // namespace

bool writable_result(const Tensor& out, const Shape& shape, DType dtype, Device device,
                     std::initializer_list<const Tensor*> inputs) {
  if (!out.defined() || out.dtype() != dtype || out.device() != device || !out.is_contiguous() ||
      out.numel() == 0 || !same_shape(out.shape(), shape) || out.is_meta()) {
    return false;
  }
  for (const Tensor* in : inputs) {
    if (in->defined() && in->shares_storage(out)) return false;
  }
  return true;
}

bool broadcast_into(IntoBinary op, const Tensor& out, const Tensor& a, const Tensor& b) {
  return with_into_binary(op, [&]<typename Op>(Op, const char* name) { return arith_into<Op>(name, out, a, b); });
}

bool broadcast_into(IntoBinary op, const Tensor& out, const Tensor& a, const Scalar& b) {
  return with_into_binary(op, [&]<typename Op>(Op, const char* name) {
    if constexpr (kIntoTakesScalar<Op>) return arith_into<Op>(name, out, a, b);
    else return false;
  });
}

bool pow_into(const Tensor& out, const Tensor& a, const Tensor& b) { return arith_into<PowOp>("pow", out, a, b); }
bool pow_into(const Tensor& out, const Tensor& a, const Scalar& b) { return arith_into<PowOp>("pow", out, a, b); }

bool compare_into(IntoCompare op, const Tensor& out, const Tensor& a, const Tensor& b) {
  return compare_dispatch(op, out, a, b);
}
bool compare_into(IntoCompare op, const Tensor& out, const Tensor& a, const Scalar& b) {
  return compare_dispatch(op, out, a, b);
}

bool where_into(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (!cond.defined() || !a.defined() || !b.defined() || cond.dtype() != kBool) return false;
  if (a.device() != cond.device() || b.device() != cond.device()) return false;
  const DType c = result_type(a, b);
  const auto shape = broadcast_of({&cond.shape(), &a.shape(), &b.shape()});
  if (!shape || !writable_result(out, *shape, c, cond.device(), {&cond, &a, &b})) return false;
  ElementwisePlan plan = plan_elementwise("where", {cond, a, b}, {kBool, c, c}, c, &out);
  if (on_cuda("where", out)) {
    where_on_device<kWithCuda>(plan);
    return true;
  }
  dispatch_all(c, "where", [&](auto tag) {
    using T = typename decltype(tag)::type;
    nary_kernel<4>({&plan.out, &plan.inputs[0], &plan.inputs[1], &plan.inputs[2]}, [](char** p) {
      *reinterpret_cast<T*>(p[0]) =
          functors::WhereOp{}(*reinterpret_cast<const bool*>(p[1]), *reinterpret_cast<const T*>(p[2]),
                              *reinterpret_cast<const T*>(p[3]));
    });
  });
  return true;
}

bool masked_fill_into(const Tensor& out, const Tensor& a, const Tensor& mask, const Scalar& value) {
  if (!a.defined() || !mask.defined() || mask.dtype() != kBool || mask.device() != a.device()) return false;
  const auto shape = broadcast_of({&a.shape(), &mask.shape()});
  if (!shape || !writable_result(out, *shape, a.dtype(), a.device(), {&a, &mask})) return false;
  // What the allocating op does after making its result: the same two steps.
  Tensor target = out;
  target.copy_(a);
  target.masked_fill_(mask, value);
  return true;
}

}  // namespace thd::detail
