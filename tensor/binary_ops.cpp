// Arithmetic between two tensors, or a tensor and a scalar: add, sub, mul, div, pow,
// maximum, minimum, in their out-of-place, in-place and operator forms.
#include <atomic>
#include <cstring>
#include <vector>

#include "tensor/check.h"
#include "tensor/cuda/elementwise_kernels.h"
#include "tensor/elementwise.h"
#include "tensor/functors/binary.h"
#include "tensor/into.h"
#include "tensor/into_binary_ops.h"
#include "tensor/pow_exponent.h"

namespace thd {
namespace {

using namespace detail;

using functors::AddOp;
using functors::DivOp;
using functors::MaximumOp;
using functors::MinimumOp;
using functors::MulOp;
using functors::PowOp;
using functors::SubOp;

template <typename Op>
constexpr unsigned allowed_dtypes() {
  return Op::kDTypes;
}

template <typename Op>
void check_dtype(const char* op, DType compute) {
  if constexpr (std::is_same_v<Op, SubOp>) {
    THD_CHECK(compute != kBool, TypeError, op,
              "subtraction, the `-` operator, with two bool tensors is not supported; use "
              "the `^` or logical_xor() operator instead");
  }
  if (!dtype_in(compute, allowed_dtypes<Op>())) {
    throw_unsupported_dtype(op, compute, allowed_dtypes<Op>());
  }
}

// As torch: subtraction refuses a bool operand whatever the other's dtype (a bool
// minus an int would silently compute in the int's dtype), with torch's two messages.
template <typename Op>
void check_bool_operands(const char* op, bool a_is_bool, bool b_is_bool) {
  if constexpr (std::is_same_v<Op, SubOp>) {
    THD_CHECK(!(a_is_bool && b_is_bool), TypeError, op,
              "subtraction, the `-` operator, with two bool tensors is not supported; use "
              "the `^` or logical_xor() operator instead");
    THD_CHECK(!a_is_bool && !b_is_bool, TypeError, op,
              "subtraction, the `-` operator, with a bool tensor is not supported; to invert a mask, use "
              "the `~` or logical_not() operator instead");
  }
}

// Runs Op's typed kernel over operands laid out by plan_flat or plan_elementwise.
template <typename Op, typename Plan>
void launch(const char* op, DType compute, const Plan& plan) {
  dispatch<allowed_dtypes<Op>()>(compute, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_kernel<T, T>(plan, Op{});
  });
}

// The same with a scalar second operand, read as compute dtype.
template <typename Op>
void launch(const char* op, DType compute, const FlatPlan<2>& plan, const Scalar& b) {
  dispatch<allowed_dtypes<Op>()>(compute, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_kernel<T, T>(plan, scalar_to<T>(b), Op{});
  });
}

// a op b on a CUDA device, where a or b (not both) may be a number; into a new
// tensor, or into *self. Planned as on the CPU (promotion, broadcasting, in-place
// checks, mixed devices refused); a number stays a value the kernel takes.
template <typename Op>
Tensor run_cuda(const char* op, const cuda::Operand& a, const cuda::Operand& b, DType compute,
                const Tensor* self = nullptr) {
  check_dtype<Op>(op, compute);
  std::vector<Tensor> tensors;
  if (a.tensor() != nullptr) tensors.push_back(*a.tensor());
  if (b.tensor() != nullptr) tensors.push_back(*b.tensor());
  ElementwisePlan plan = plan_elementwise(op, tensors, compute, compute, self);
  const cuda::Operand pa = a.tensor() != nullptr ? cuda::Operand(plan.inputs[0]) : a;
  const cuda::Operand pb = b.tensor() != nullptr ? cuda::Operand(plan.inputs.back()) : b;
  if constexpr (std::is_same_v<Op, PowOp>) {
    if (pb.tensor() == nullptr) {
      check_integer_exponent(pb.value(), compute);
    } else if (is_integral(compute)) {
      THD_CHECK(!cuda::has_negative("pow", *pb.tensor()), ValueError, "pow",
                "integers to negative integer powers are not allowed");
    }
  }
  cuda::binary_op<Op>(op, compute, plan.out, pa, pb);
  return plan.finish();
}

// a op b into a new tensor.
template <typename Op>
Tensor run(const char* op, const Tensor& a, const Tensor& b, DType compute) {
  check_dtype<Op>(op, compute);
  if (auto flat = plan_flat<2>({&a, &b}, compute, compute)) {
    if constexpr (std::is_same_v<Op, PowOp>) check_integer_exponent(b, compute);
    launch<Op>(op, compute, *flat);
    return std::move(flat->out);
  }
  ElementwisePlan plan = plan_elementwise(op, {a, b}, compute, compute);
  if constexpr (std::is_same_v<Op, PowOp>) check_integer_exponent(plan.inputs[1], compute);
  launch<Op>(op, compute, plan);
  return plan.finish();
}

// self op= other.
template <typename Op>
void run_inplace(const char* op, Tensor& self, const Tensor& other, DType compute) {
  check_dtype<Op>(op, compute);
  if (auto flat = plan_flat<2>({&self, &other}, compute, compute, &self)) {
    if constexpr (std::is_same_v<Op, PowOp>) check_integer_exponent(other, compute);
    launch<Op>(op, compute, *flat);
    return;
  }
  ElementwisePlan plan = plan_elementwise(op, {self, other}, compute, compute, &self);
  if constexpr (std::is_same_v<Op, PowOp>) check_integer_exponent(plan.inputs[1], compute);
  launch<Op>(op, compute, plan);
  plan.finish();
}

// The dtype an op computes in, given its operands' promoted dtype.
template <typename Op>
DType compute_dtype(DType promoted) {
  if constexpr (std::is_same_v<Op, DivOp>) return is_floating_point(promoted) ? promoted : kFloat32;
  else return promoted;
}

template <typename Op>
Tensor tensor_tensor(const char* op, const Tensor& a, const Tensor& b) {
  check_data(a, op, "self");
  check_data(b, op, "other");
  check_bool_operands<Op>(op, a.dtype() == kBool, b.dtype() == kBool);
  const DType c = compute_dtype<Op>(result_type(a, b));
  if (on_cuda(op, a)) {
    if constexpr (kWithCuda) return run_cuda<Op>(op, a, b, c);
  }
  return run<Op>(op, a, b, c);
}

// A scalar operand takes part as a 0-dim tensor of the compute dtype would; on the
// flat path it stays a value. (pow checks its exponent as a tensor.)
template <typename Op>
constexpr bool scalar_stays_value = !std::is_same_v<Op, PowOp>;

template <typename Op>
Tensor tensor_scalar(const char* op, const Tensor& a, const Scalar& b) {
  check_data(a, op, "self");
  check_bool_operands<Op>(op, a.dtype() == kBool, b.is_bool());
  DType c = compute_dtype<Op>(result_type(a, b));
  if (on_cuda(op, a)) {
    if constexpr (kWithCuda) return run_cuda<Op>(op, a, b, c);
  }
  if constexpr (scalar_stays_value<Op>) {
    check_dtype<Op>(op, c);
    if (auto flat = plan_flat<1>({&a}, c, c)) {
      launch<Op>(op, c, *flat, b);
      return std::move(flat->out);
    }
  }
  return run<Op>(op, a, scalar_tensor(b, c), c);
}

template <typename Op>
Tensor scalar_tensor_op(const char* op, const Scalar& a, const Tensor& b) {
  check_data(b, op, "other");
  check_bool_operands<Op>(op, a.is_bool(), b.dtype() == kBool);
  DType c = compute_dtype<Op>(result_type(b, a));
  if (on_cuda(op, b)) {
    if constexpr (kWithCuda) return run_cuda<Op>(op, a, b, c);
  }
  return run<Op>(op, scalar_tensor(a, c), b, c);
}

template <typename Op>
Tensor& inplace(const char* op, Tensor& self, const Tensor& other) {
  check_data(self, op, "self");
  check_data(other, op, "other");
  check_bool_operands<Op>(op, self.dtype() == kBool, other.dtype() == kBool);
  const DType c = compute_dtype<Op>(result_type(self, other));
  if (on_cuda(op, self)) {
    if constexpr (kWithCuda) {
      run_cuda<Op>(op, self, other, c, &self);
      return self;
    }
  }
  run_inplace<Op>(op, self, other, c);
  return self;
}

template <typename Op>
Tensor& inplace(const char* op, Tensor& self, const Scalar& other) {
  check_data(self, op, "self");
  check_bool_operands<Op>(op, self.dtype() == kBool, other.is_bool());
  DType c = compute_dtype<Op>(result_type(self, other));
  if (on_cuda(op, self)) {
    if constexpr (kWithCuda) {
      run_cuda<Op>(op, self, other, c, &self);
      return self;
    }
  }
  if constexpr (scalar_stays_value<Op>) {
    check_dtype<Op>(op, c);
    if (auto flat = plan_flat<1>({&self}, c, c, &self)) {
      launch<Op>(op, c, *flat, other);
      return self;
    }
  }
  run_inplace<Op>(op, self, scalar_tensor(other, c), c);
  return self;
}

// Op's kernel of element type T over a flat plan: the loop launch() runs.
template <typename Op, typename T>
void flat_kernel(const FlatBinary& p) {
  for_each_flat<3>(p.base, p.step, p.numel,
                   [](char** ptr, const int64_t* s, int64_t n) {
                     Op f;
                     binary_run<T, T>(ptr, s, n, f);
                   });
}

// a op b into `out` on the flat path (tensor/into.h), planned and not run.
template <typename Op>
std::optional<FlatBinary> plan_into(const char* op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (!out.defined() || !a.defined() || !b.defined() || !a.device().is_cpu()) return std::nullopt;
  if (a.shares_storage(out) || b.shares_storage(out)) return std::nullopt;
  const DType c = compute_dtype<Op>(result_type(a, b));
  if (!dtype_in(c, allowed_dtypes<Op>())) return std::nullopt;
  if constexpr (std::is_same_v<Op, SubOp>) {
    if (c == kBool) return std::nullopt;
  }
  auto flat = plan_flat<2>({&a, &b}, c, c, &out);
  if (!flat) return std::nullopt;
  FlatBinary plan{flat->base, flat->step, flat->numel, nullptr, {}};
  dispatch<allowed_dtypes<Op>()>(c, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    plan.kernel = &flat_kernel<Op, T>;
  });
  return plan;
}

template <typename Op>
bool into(const char* op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const std::optional<FlatBinary> plan = plan_into<Op>(op, out, a, b);
  if (!plan) return false;
  plan->run();
  return true;
}

// The same with a number b, which the plan holds.
template <typename Op, typename T>
void flat_scalar_kernel(const FlatBinary& p) {
  static_assert(sizeof(T) <= sizeof(p.scalar));
  const std::array<char*, 3> base{p.base[0], p.base[1],
                                  const_cast<char*>(reinterpret_cast<const char*>(p.scalar.data()))};
  const std::array<int64_t, 3> step{p.step[0], p.step[1], 0};
  for_each_flat<3>(base, step, p.numel, [](char** ptr, const int64_t* s, int64_t n) {
    Op f;
    binary_run<T, T>(ptr, s, n, f);
  });
}

template <typename Op>
std::optional<FlatBinary> plan_into(const char* op, const Tensor& out, const Tensor& a, const Scalar& b) {
  if (!out.defined() || !a.defined() || !a.device().is_cpu() || a.shares_storage(out)) return std::nullopt;
  const DType c = compute_dtype<Op>(result_type(a, b));
  if (!dtype_in(c, allowed_dtypes<Op>())) return std::nullopt;
  if constexpr (std::is_same_v<Op, SubOp>) {
    if (c == kBool) return std::nullopt;
  }
  auto flat = plan_flat<1>({&a}, c, c, &out);
  if (!flat) return std::nullopt;
  FlatBinary plan{{flat->base[0], flat->base[1], nullptr}, {flat->step[0], flat->step[1], 0}, flat->numel, nullptr, {}};
  dispatch<allowed_dtypes<Op>()>(c, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T value = scalar_to<T>(b);
    std::memcpy(plan.scalar.data(), &value, sizeof(T));
    plan.kernel = &flat_scalar_kernel<Op, T>;
  });
  return plan;
}

template <typename Op>
bool into(const char* op, const Tensor& out, const Tensor& a, const Scalar& b) {
  const std::optional<FlatBinary> plan = plan_into<Op>(op, out, a, b);
  if (!plan) return false;
  plan->run();
  return true;
}

}  // namespace

Tensor Tensor::add(const Tensor& o) const { return tensor_tensor<AddOp>("add", *this, o); }
Tensor Tensor::add(Scalar o) const { return tensor_scalar<AddOp>("add", *this, o); }
Tensor& Tensor::add_(const Tensor& o) { return inplace<AddOp>("add_", *this, o); }
Tensor& Tensor::add_(Scalar o) { return inplace<AddOp>("add_", *this, o); }
Tensor Tensor::sub(const Tensor& o) const { return tensor_tensor<SubOp>("sub", *this, o); }
Tensor Tensor::sub(Scalar o) const { return tensor_scalar<SubOp>("sub", *this, o); }
Tensor& Tensor::sub_(const Tensor& o) { return inplace<SubOp>("sub_", *this, o); }
Tensor& Tensor::sub_(Scalar o) { return inplace<SubOp>("sub_", *this, o); }
Tensor Tensor::mul(const Tensor& o) const { return tensor_tensor<MulOp>("mul", *this, o); }
Tensor Tensor::mul(Scalar o) const { return tensor_scalar<MulOp>("mul", *this, o); }
Tensor& Tensor::mul_(const Tensor& o) { return inplace<MulOp>("mul_", *this, o); }
Tensor& Tensor::mul_(Scalar o) { return inplace<MulOp>("mul_", *this, o); }
Tensor Tensor::div(const Tensor& o) const { return tensor_tensor<DivOp>("div", *this, o); }
Tensor Tensor::div(Scalar o) const { return tensor_scalar<DivOp>("div", *this, o); }
Tensor& Tensor::div_(const Tensor& o) { return inplace<DivOp>("div_", *this, o); }
Tensor& Tensor::div_(Scalar o) { return inplace<DivOp>("div_", *this, o); }
Tensor Tensor::pow(const Tensor& e) const { return tensor_tensor<PowOp>("pow", *this, e); }
Tensor Tensor::pow(Scalar e) const { return tensor_scalar<PowOp>("pow", *this, e); }
Tensor& Tensor::pow_(const Tensor& e) { return inplace<PowOp>("pow_", *this, e); }
Tensor& Tensor::pow_(Scalar e) { return inplace<PowOp>("pow_", *this, e); }
Tensor Tensor::maximum(const Tensor& o) const { return tensor_tensor<MaximumOp>("maximum", *this, o); }
Tensor Tensor::minimum(const Tensor& o) const { return tensor_tensor<MinimumOp>("minimum", *this, o); }

Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
Tensor operator+(const Tensor& a, Scalar b) { return a.add(b); }
Tensor operator-(const Tensor& a, Scalar b) { return a.sub(b); }
Tensor operator*(const Tensor& a, Scalar b) { return a.mul(b); }
Tensor operator/(const Tensor& a, Scalar b) { return a.div(b); }
Tensor operator+(Scalar a, const Tensor& b) { return scalar_tensor_op<AddOp>("add", a, b); }
Tensor operator-(Scalar a, const Tensor& b) { return scalar_tensor_op<SubOp>("sub", a, b); }
Tensor operator*(Scalar a, const Tensor& b) { return scalar_tensor_op<MulOp>("mul", a, b); }
Tensor operator/(Scalar a, const Tensor& b) { return scalar_tensor_op<DivOp>("div", a, b); }
Tensor operator-(const Tensor& a) { return a.neg(); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
Tensor& operator+=(Tensor& a, Scalar b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, Scalar b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, Scalar b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, Scalar b) { return a.div_(b); }

namespace detail {

bool binary_into(IntoBinary op, const Tensor& out, const Tensor& a, const Tensor& b) {
  return with_into_binary(op, [&]<typename Op>(Op, const char* name) { return into<Op>(name, out, a, b); });
}

std::optional<FlatBinary> plan_binary_into(IntoBinary op, const Tensor& out, const Tensor& a, const Tensor& b) {
  std::optional<FlatBinary> plan;
  with_into_binary(op, [&]<typename Op>(Op, const char* name) {
    plan = plan_into<Op>(name, out, a, b);
    return plan.has_value();
  });
  return plan;
}

std::optional<FlatBinary> plan_binary_into(IntoBinary op, const Tensor& out, const Tensor& a, const Scalar& b) {
  std::optional<FlatBinary> plan;
  with_into_binary(op, [&]<typename Op>(Op, const char* name) {
    if constexpr (kIntoTakesScalar<Op>) plan = plan_into<Op>(name, out, a, b);
    return plan.has_value();
  });
  return plan;
}

bool binary_into(IntoBinary op, const Tensor& out, const Tensor& a, const Scalar& b) {
  return with_into_binary(op, [&]<typename Op>(Op, const char* name) {
    if constexpr (kIntoTakesScalar<Op>) return into<Op>(name, out, a, b);
    else return false;
  });
}

void check_integer_exponent(const Tensor& exponent, DType compute) {
  if (!is_integral(compute)) return;
  dispatch<kIntegerSet>(exponent.dtype(), "pow", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_signed_v<T>) {
      std::atomic<bool> negative{false};
      nary_kernel<1>({&exponent}, [&](char** p) {
        if (*reinterpret_cast<const T*>(p[0]) < 0) negative.store(true, std::memory_order_relaxed);
      });
      THD_CHECK(!negative.load(), ValueError, "pow", "integers to negative integer powers are not allowed");
    }
  });
}

void check_integer_exponent(const Scalar& exponent, DType compute) {
  if (!is_integral(compute)) return;
  dispatch<kIntegerSet>(compute, "pow", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_signed_v<T>) {
      THD_CHECK(scalar_to<T>(exponent) >= 0, ValueError, "pow",
                "integers to negative integer powers are not allowed");
    }
  });
}

}  // namespace detail

}  // namespace thd
