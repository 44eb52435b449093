// The math of the unary ops (neg ... gelu), written once for the CPU loops
// (tensor/unary_ops.cpp) and the CUDA kernels (tensor/cuda/unary_*_kernels.cu). Each
// functor maps a value of a compute type C to a C. neg, abs and relu keep the input's
// dtype (numeric dtypes); the others compute in floating point (kFloatMath), integer
// and bool inputs being converted to float32 first.
#pragma once

#include <type_traits>

#include "tensor/dtype_set.h"
#include "tensor/functors/host_device.h"
#include "tensor/functors/math.h"
#include "tensor/int_math.h"

namespace thd::functors {

struct NegOp {
  static constexpr bool kFloatMath = false;
  template <typename C>
  THD_HOST_DEVICE C operator()(C x) const {
    return detail::wrapping_neg(x);
  }
};

struct AbsOp {
  static constexpr bool kFloatMath = false;
  template <typename C>
  THD_HOST_DEVICE C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) return x;
    else if constexpr (std::is_floating_point_v<C>) return math::abs(x);
    else return x < 0 ? detail::wrapping_neg(x) : x;
  }
};

struct ReluOp {
  static constexpr bool kFloatMath = false;
  template <typename C>
  THD_HOST_DEVICE C operator()(C x) const {
    return x > C(0) ? x : (x != x ? x : C(0));  // NaN stays NaN
  }
};

struct ExpOp {
  static constexpr bool kFloatMath = true;
  template <typename C>
  THD_HOST_DEVICE C operator()(C x) const {
    return math::exp(x);
  }
};

struct LogOp {
  static constexpr bool kFloatMath = true;
  template <typename C>
  THD_HOST_DEVICE C operator()(C x) const {
    return math::log(x);
  }
};

struct SqrtOp {
  static constexpr bool kFloatMath = true;
  template <typename C>
  THD_HOST_DEVICE C operator()(C x) const {
    return math::sqrt(x);
  }
};

// 1 / sqrt(x) rounded twice, on both sides (not CUDA's rsqrtf, which differs in the
// last bits from the CPU).
struct RsqrtOp {
  static constexpr bool kFloatMath = true;
  template <typename C>
  THD_HOST_DEVICE C operator()(C x) const {
    return C(1) / math::sqrt(x);
  }
};

struct SinOp {
  static constexpr bool kFloatMath = true;
  template <typename C>
  THD_HOST_DEVICE C operator()(C x) const {
    return math::sin(x);
  }
};

struct CosOp {
  static constexpr bool kFloatMath = true;
  template <typename C>
  THD_HOST_DEVICE C operator()(C x) const {
    return math::cos(x);
  }
};

struct TanhOp {
  static constexpr bool kFloatMath = true;
  template <typename C>
  THD_HOST_DEVICE C operator()(C x) const {
    return math::tanh(x);
  }
};

struct SigmoidOp {
  static constexpr bool kFloatMath = true;
  template <typename C>
  THD_HOST_DEVICE C operator()(C x) const {
    return C(1) / (C(1) + math::exp(-x));
  }
};

// The exact form, x * Phi(x), as torch's default approximate='none'.
struct GeluOp {
  static constexpr bool kFloatMath = true;
  template <typename C>
  THD_HOST_DEVICE C operator()(C x) const {
    return C(0.5) * x * (C(1) + math::erf(x * C(0.70710678118654752440)));
  }
};

// The dtype families a unary functor accepts as its compute dtype.
template <typename Op>
inline constexpr unsigned unary_dtypes_v =
    Op::kFloatMath ? detail::kFloatingSet : detail::kNumericSet;

}  // namespace thd::functors
