// One switch from a runtime DType to a C++ type. Kernels are templates; an op calls
// dispatch<kFloatingSet>(dtype, op_name, [&](auto tag) { using T = typename decltype(tag)::type; ... })
// and names which dtype families it supports, so an unsupported dtype is a clear
// TypeError rather than a silent wrong answer.
#pragma once

#include <cstdint>
#include <limits>
#include <utility>
#include <type_traits>

#include <thd/dtype.h>
#include <thd/half.h>

#include "tensor/check.h"
#include "tensor/dtype_set.h"

namespace thd::detail {

template <typename T>
struct TypeTag {
  using type = T;
};

template <typename T>
inline constexpr bool is_reduced_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_reduced_float_v<T>;

// The type arithmetic on T happens in: float for the 16-bit floats, T otherwise.
template <typename T>
using compute_t = std::conditional_t<is_reduced_float_v<T>, float, T>;

// Calls f(TypeTag<T>{}) for T the storage type of `dtype`, instantiating f only for
// the dtype families in `Allowed`; any other dtype is a TypeError naming `op`.
template <unsigned Allowed, typename F>
decltype(auto) dispatch(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Bool:
      if constexpr ((Allowed & kBoolSet) != 0) return f(TypeTag<bool>{});
      break;
    case DType::UInt8:
      if constexpr ((Allowed & kIntegerSet) != 0) return f(TypeTag<uint8_t>{});
      break;
    case DType::Int8:
      if constexpr ((Allowed & kIntegerSet) != 0) return f(TypeTag<int8_t>{});
      break;
    case DType::Int32:
      if constexpr ((Allowed & kIntegerSet) != 0) return f(TypeTag<int32_t>{});
      break;
    case DType::Int64:
      if constexpr ((Allowed & kIntegerSet) != 0) return f(TypeTag<int64_t>{});
      break;
    case DType::Float16:
      if constexpr ((Allowed & kFloatingSet) != 0) return f(TypeTag<Half>{});
      break;
    case DType::BFloat16:
      if constexpr ((Allowed & kFloatingSet) != 0) return f(TypeTag<BFloat16>{});
      break;
    case DType::Float32:
      if constexpr ((Allowed & kFloatingSet) != 0) return f(TypeTag<float>{});
      break;
    case DType::Float64:
      if constexpr ((Allowed & kFloatingSet) != 0) return f(TypeTag<double>{});
      break;
  }
  throw_unsupported_dtype(op, dtype, Allowed);
}

template <typename F>
decltype(auto) dispatch_all(DType dtype, const char* op, F&& f) {
  return dispatch<kAllSet>(dtype, op, std::forward<F>(f));
}

// Value conversion between storage types, defined for every pair and never UB:
// NaN and out-of-range floats going to an integer saturate (NaN -> 0).
template <typename To, typename From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<compute_t<From>>(v) != compute_t<From>(0);
  } else if constexpr (is_reduced_float_v<From>) {
    return convert<To, float>(static_cast<float>(v));
  } else if constexpr (is_reduced_float_v<To>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    constexpr auto lo = static_cast<From>(std::numeric_limits<To>::min());
    // max() rounds up to a power of two in From; values at or above it saturate.
    constexpr auto hi = static_cast<From>(std::numeric_limits<To>::max());
    if (!(v == v)) return To(0);
    if (v <= lo) return std::numeric_limits<To>::min();
    if (v >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace thd::detail
