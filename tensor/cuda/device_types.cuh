// Element types on the device: which CUDA type stores each dtype, which type
// arithmetic happens in, conversions between any two of them, and the switch from a
// runtime DType to a kernel's template argument. The CUDA counterpart of
// tensor/dispatch.h; its conversions give the same values as the CPU's, so a kernel's
// result can be compared with the CPU result exactly where the math is exact.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include <thd/dtype.h>

#include "tensor/dtype_set.h"

namespace thd::cuda {

template <typename T>
struct Tag {
  using type = T;
};

template <typename T>
inline constexpr bool is_reduced_float_v =
    std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_reduced_float_v<T>;

// The type arithmetic on T happens in: float for the 16-bit floats, T otherwise.
template <typename T>
using compute_t = std::conditional_t<is_reduced_float_v<T>, float, T>;

// Widening to the compute type and narrowing back.
template <typename T>
__host__ __device__ inline compute_t<T> to_compute(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return v;
}

// Value conversion between storage types, defined for every pair and never UB, with
// the CPU's rules (dispatch.h convert): to bool is != 0; NaN and out-of-range floats
// going to an integer saturate (NaN -> 0); 16-bit floats round to nearest even.
template <typename To, typename From>
__host__ __device__ inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_reduced_float_v<From>) {
    return convert<To, float>(to_compute(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_same_v<To, __half>) {
    // Through float, as the CPU's Half(float) does, even from double: rounding twice
    // differs from __double2half on rare values, and results must agree.
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    constexpr auto lo = static_cast<From>(std::numeric_limits<To>::min());
    constexpr auto hi = static_cast<From>(std::numeric_limits<To>::max());
    if (!(v == v)) return To(0);
    if (v <= lo) return std::numeric_limits<To>::min();
    if (v >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// Calls f(Tag<T>{}) for T the device storage type of `dtype`, instantiating f only
// for the dtype families in `Allowed` (tensor/dtype_set.h); any other dtype is a
// TypeError naming `op`. Runs on the host, before a launch.
template <unsigned Allowed, typename F>
decltype(auto) dispatch(DType dtype, const char* op, F&& f) {
  using thd::detail::kBoolSet;
  using thd::detail::kFloatingSet;
  using thd::detail::kIntegerSet;
  switch (dtype) {
    case DType::Bool:
      if constexpr ((Allowed & kBoolSet) != 0) return f(Tag<bool>{});
      break;
    case DType::UInt8:
      if constexpr ((Allowed & kIntegerSet) != 0) return f(Tag<uint8_t>{});
      break;
    case DType::Int8:
      if constexpr ((Allowed & kIntegerSet) != 0) return f(Tag<int8_t>{});
      break;
    case DType::Int32:
      if constexpr ((Allowed & kIntegerSet) != 0) return f(Tag<int32_t>{});
      break;
    case DType::Int64:
      if constexpr ((Allowed & kIntegerSet) != 0) return f(Tag<int64_t>{});
      break;
    case DType::Float16:
      if constexpr ((Allowed & kFloatingSet) != 0) return f(Tag<__half>{});
      break;
    case DType::BFloat16:
      if constexpr ((Allowed & kFloatingSet) != 0) return f(Tag<__nv_bfloat16>{});
      break;
    case DType::Float32:
      if constexpr ((Allowed & kFloatingSet) != 0) return f(Tag<float>{});
      break;
    case DType::Float64:
      if constexpr ((Allowed & kFloatingSet) != 0) return f(Tag<double>{});
      break;
  }
  thd::detail::throw_unsupported_dtype(op, dtype, Allowed);
}

}  // namespace thd::cuda
