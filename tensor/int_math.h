// Integer arithmetic that wraps on overflow like the hardware (and torch) instead of
// being undefined behaviour: signed values are computed in their unsigned type.
// Shared by the CPU loops and the CUDA kernels (THD_HOST_DEVICE).
#pragma once

#include <type_traits>

#include "tensor/functors/host_device.h"

namespace thd::detail {

template <typename T, bool = std::is_integral_v<T> && !std::is_same_v<T, bool>>
struct wrap_type {
  using type = T;
};
template <typename T>
struct wrap_type<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using wrap_t = typename wrap_type<T>::type;

template <typename T>
THD_HOST_DEVICE inline T wrapping_add(T a, T b) {
  return static_cast<T>(static_cast<wrap_t<T>>(a) + static_cast<wrap_t<T>>(b));
}
template <typename T>
THD_HOST_DEVICE inline T wrapping_sub(T a, T b) {
  return static_cast<T>(static_cast<wrap_t<T>>(a) - static_cast<wrap_t<T>>(b));
}
template <typename T>
THD_HOST_DEVICE inline T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T> && sizeof(T) < sizeof(unsigned)) {
    // uint8/int8 promote to int, where the product cannot overflow.
    return static_cast<T>(static_cast<unsigned>(a) * static_cast<unsigned>(b));
  } else {
    return static_cast<T>(static_cast<wrap_t<T>>(a) * static_cast<wrap_t<T>>(b));
  }
}
template <typename T>
THD_HOST_DEVICE inline T wrapping_neg(T a) {
  return static_cast<T>(wrap_t<T>(0) - static_cast<wrap_t<T>>(a));
}
// base^exp for exp >= 0 by repeated squaring.
template <typename T>
THD_HOST_DEVICE inline T wrapping_pow(T base, T exp) {
  T result = 1;
  while (exp > 0) {
    if (exp & 1) result = wrapping_mul(result, base);
    base = wrapping_mul(base, base);
    exp = static_cast<T>(exp >> 1);
  }
  return result;
}

}  // namespace thd::detail
