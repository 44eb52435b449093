// The math functions the op functors use, callable from host and device code. The
// host keeps std:: (so the CPU results are the ones it always had); device code calls
// CUDA's functions of the same kind (correctly rounded sqrt and division, as nvcc
// builds them without fast-math; exp, log, sin, ... within CUDA's documented ulp).
// Only float and double reach these: 16-bit floats compute in float.
#pragma once

#include <cmath>
#include <type_traits>

#include "tensor/functors/host_device.h"

namespace thd::math {

template <typename T>
THD_HOST_DEVICE inline T exp(T x) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>) return ::expf(x);
  else return ::exp(x);
#else
  return std::exp(x);
#endif
}

template <typename T>
THD_HOST_DEVICE inline T log(T x) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>) return ::logf(x);
  else return ::log(x);
#else
  return std::log(x);
#endif
}

template <typename T>
THD_HOST_DEVICE inline T sqrt(T x) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>) return ::sqrtf(x);
  else return ::sqrt(x);
#else
  return std::sqrt(x);
#endif
}

template <typename T>
THD_HOST_DEVICE inline T sin(T x) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>) return ::sinf(x);
  else return ::sin(x);
#else
  return std::sin(x);
#endif
}

template <typename T>
THD_HOST_DEVICE inline T cos(T x) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>) return ::cosf(x);
  else return ::cos(x);
#else
  return std::cos(x);
#endif
}

template <typename T>
THD_HOST_DEVICE inline T tanh(T x) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>) return ::tanhf(x);
  else return ::tanh(x);
#else
  return std::tanh(x);
#endif
}

template <typename T>
THD_HOST_DEVICE inline T erf(T x) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>) return ::erff(x);
  else return ::erf(x);
#else
  return std::erf(x);
#endif
}

template <typename T>
THD_HOST_DEVICE inline T abs(T x) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>) return ::fabsf(x);
  else return ::fabs(x);
#else
  return std::abs(x);
#endif
}

template <typename T>
THD_HOST_DEVICE inline T pow(T x, T y) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>) return ::powf(x, y);
  else return ::pow(x, y);
#else
  return std::pow(x, y);
#endif
}

// NaN is the value unequal to itself; exact on both sides (neither uses fast-math).
template <typename T>
THD_HOST_DEVICE inline bool is_nan(T x) {
  return x != x;
}

}  // namespace thd::math
