#include "tensor/op_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "tensor/check.h"
#include "tensor/shape_util.h"

namespace thd {
namespace detail {

Tensor scalar_tensor(const Scalar& s, DType dtype) {
  Tensor t = Tensor::empty({}, dtype);
  dispatch_all(dtype, "scalar_tensor", [&](auto tag) {
    using T = typename decltype(tag)::type;
    *t.data<T>() = scalar_to<T>(s);
  });
  return t;
}

namespace {

std::string scalar_str(const Scalar& v) {
  if (v.is_floating_point()) return fmt::format("{}", v.to_double());
  if (v.is_bool()) return v.to_bool() ? "True" : "False";
  return std::to_string(v.to_int64());
}

template <typename T>
double max_finite() {
  if constexpr (std::is_same_v<T, Half>) {
    return 65504.0;
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return 3.3895313892515355e38;
  } else {
    return static_cast<double>(std::numeric_limits<T>::max());
  }
}

template <typename T>
bool value_fits(const Scalar& v) {
  if (v.is_bool()) return true;
  if (v.is_floating_point()) {
    const double d = v.to_double();
    if constexpr (is_float_v<T>) {
      return !std::isfinite(d) || std::abs(d) <= max_finite<T>();
    } else {
      const auto lo = static_cast<double>(std::numeric_limits<T>::lowest());
      const auto hi = static_cast<double>(std::numeric_limits<T>::max());
      return !std::isnan(d) && d >= lo && d <= hi;
    }
  }
  const int64_t i = v.to_int64();
  if constexpr (is_float_v<T>) {
    return std::abs(static_cast<double>(i)) <= max_finite<T>();
  } else if constexpr (std::is_unsigned_v<T>) {
    const auto hi = static_cast<uint64_t>(std::numeric_limits<T>::max());
    return i >= 0 ? static_cast<uint64_t>(i) <= hi : -static_cast<uint64_t>(i) <= hi;
  } else {
    return i >= static_cast<int64_t>(std::numeric_limits<T>::lowest()) &&
           i <= static_cast<int64_t>(std::numeric_limits<T>::max());
  }
}

}  // namespace

void check_value_fits(const Scalar& s, DType dtype, const char* op) {
  const bool ok = dispatch_all(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) return true;
    else return value_fits<T>(s);
  });
  THD_CHECK(ok, ValueError, op, "value {} cannot be converted to type {} without overflow",
            scalar_str(s), dtype);
}


void check_can_cast(DType result, DType out, const char* op) {
  THD_CHECK(can_cast(result, out), TypeError, op,
            "result type {} can't be cast to the desired output type {}", result, out);
}

void check_writable(const Tensor& t, const char* op) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    THD_CHECK(t.shape()[d] <= 1 || t.strides()[d] != 0, ValueError, op,
              "unsupported operation: more than one element of the written-to tensor "
              "(shape {}, strides {}) refers to a single memory location; clone() it "
              "before writing to it",
              shape_str(t.shape()), shape_str(t.strides()));
  }
}

namespace {
// [first, last] byte addresses the tensor can touch.
std::pair<const char*, const char*> byte_range(const Tensor& t) {
  const char* base = static_cast<const char*>(t.data_ptr());
  int64_t lo = 0, hi = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    int64_t span = (t.shape()[d] - 1) * t.strides()[d];
    (span < 0 ? lo : hi) += span;
  }
  auto es = static_cast<int64_t>(t.element_size());
  return {base + lo * es, base + hi * es + es - 1};
}
}  // namespace

bool memory_overlaps(const Tensor& a, const Tensor& b) {
  if (!a.shares_storage(b) || a.numel() == 0 || b.numel() == 0) return false;
  auto [alo, ahi] = byte_range(a);
  auto [blo, bhi] = byte_range(b);
  return alo <= bhi && blo <= ahi;
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.shares_storage(b) && a.storage_offset() == b.storage_offset() &&
         a.dtype() == b.dtype() && a.shape() == b.shape() && a.strides() == b.strides();
}

Tensor unalias_input(const Tensor& in, const Tensor& out) {
  if (same_view(in, out) || !memory_overlaps(in, out)) return in;
  return in.clone();
}

DType combine_categories(DType higher, DType lower) {
  if (is_floating_point(higher)) return higher;
  if (higher == DType::Bool || is_floating_point(lower)) return promote_types(higher, lower);
  return higher;
}

void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    if (first == nullptr) {
      first = t;
    } else if (t->device() != first->device()) {
      THD_THROW(ValueError, op, "expected all tensors on one device, got {} and {}",
                first->device().str(), t->device().str());
    }
  }
}

void check_cpu_kernel(const char* op, const Tensor& t) {
  if (t.defined() && !t.device().is_cpu()) [[unlikely]] {
    THD_THROW(NotImplementedError, op,
              "{} has no kernel for {} tensors yet; copy to the CPU with .cpu() first", op,
              t.device().str());
  }
}

}  // namespace detail

DType result_type(const Tensor& a, const Tensor& b) {
  detail::check_defined(a, "result_type");
  detail::check_defined(b, "result_type");
  bool ad = a.dim() > 0, bd = b.dim() > 0;
  if (ad == bd) return promote_types(a.dtype(), b.dtype());
  return ad ? detail::combine_categories(a.dtype(), b.dtype())
            : detail::combine_categories(b.dtype(), a.dtype());
}

DType result_type(const Tensor& a, Scalar b) {
  detail::check_defined(a, "result_type");
  // Python-number semantics: a float scalar counts as the default float dtype.
  DType wrapped = b.is_floating_point() ? kFloat32 : b.is_integral() ? kInt64 : kBool;
  return detail::combine_categories(a.dtype(), wrapped);
}

}  // namespace thd
