// The arithmetic of the binary ops (add ... minimum), written once for the CPU loops
// (tensor/binary_ops.cpp) and the CUDA kernels (tensor/cuda/binary_*_kernels.cu), so
// both compute the same thing. Each functor maps two values of a compute type C
// (float for the 16-bit floats, the dtype's own type otherwise) to a C, and names the
// dtype families it accepts (kDTypes, tensor/dtype_set.h).
#pragma once

#include <type_traits>

#include "tensor/dtype_set.h"
#include "tensor/functors/host_device.h"
#include "tensor/functors/math.h"
#include "tensor/int_math.h"

namespace thd::functors {

// Bool arithmetic follows torch: + is or, * is and.
struct AddOp {
  static constexpr unsigned kDTypes = detail::kAllSet;
  template <typename C>
  THD_HOST_DEVICE C operator()(C a, C b) const {
    if constexpr (std::is_same_v<C, bool>) return a || b;
    else return detail::wrapping_add(a, b);
  }
};

// Bool is refused before dispatch, with a hint (binary_ops.cpp).
struct SubOp {
  static constexpr unsigned kDTypes = detail::kNumericSet;
  template <typename C>
  THD_HOST_DEVICE C operator()(C a, C b) const {
    return detail::wrapping_sub(a, b);
  }
};

struct MulOp {
  static constexpr unsigned kDTypes = detail::kAllSet;
  template <typename C>
  THD_HOST_DEVICE C operator()(C a, C b) const {
    if constexpr (std::is_same_v<C, bool>) return a && b;
    else return detail::wrapping_mul(a, b);
  }
};

// True division: integer operands are computed in float32 (binary_ops.cpp).
struct DivOp {
  static constexpr unsigned kDTypes = detail::kFloatingSet;
  template <typename C>
  THD_HOST_DEVICE C operator()(C a, C b) const {
    return a / b;
  }
};

// Integer exponents must be >= 0; the op checks that before running the kernel.
struct PowOp {
  static constexpr unsigned kDTypes = detail::kNumericSet;
  template <typename C>
  THD_HOST_DEVICE C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) return math::pow(a, b);
    else return detail::wrapping_pow(a, b);
  }
};

// NaN wins, as torch.maximum.
struct MaximumOp {
  static constexpr unsigned kDTypes = detail::kAllSet;
  template <typename C>
  THD_HOST_DEVICE C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      if (math::is_nan(a)) return a;
      if (math::is_nan(b)) return b;
    }
    return a < b ? b : a;
  }
};

struct MinimumOp {
  static constexpr unsigned kDTypes = detail::kAllSet;
  template <typename C>
  THD_HOST_DEVICE C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      if (math::is_nan(a)) return a;
      if (math::is_nan(b)) return b;
    }
    return b < a ? b : a;
  }
};

}  // namespace thd::functors
