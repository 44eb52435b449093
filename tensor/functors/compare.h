// The comparisons, clamp and where, written once for the CPU loops
// (tensor/compare_ops.cpp) and the CUDA kernels (tensor/cuda/compare_kernels.cu).
// Comparisons map two values of a compute type C to a bool and accept every dtype.
#pragma once

#include "tensor/functors/host_device.h"

namespace thd::functors {

struct EqOp {
  template <typename C>
  THD_HOST_DEVICE bool operator()(C a, C b) const { return a == b; }
};
struct NeOp {
  template <typename C>
  THD_HOST_DEVICE bool operator()(C a, C b) const { return a != b; }
};
struct LtOp {
  template <typename C>
  THD_HOST_DEVICE bool operator()(C a, C b) const { return a < b; }
};
struct LeOp {
  template <typename C>
  THD_HOST_DEVICE bool operator()(C a, C b) const { return a <= b; }
};
struct GtOp {
  template <typename C>
  THD_HOST_DEVICE bool operator()(C a, C b) const { return a > b; }
};
struct GeOp {
  template <typename C>
  THD_HOST_DEVICE bool operator()(C a, C b) const { return a >= b; }
};

// x limited to [lo, hi], either bound optional. The bounds are already rounded to
// the input's dtype (as torch does). NaN stays NaN (both comparisons are false);
// lo > hi gives hi everywhere.
template <typename C>
struct ClampOp {
  C lo;
  C hi;
  bool has_lo;
  bool has_hi;

  THD_HOST_DEVICE C operator()(C x) const {
    if (has_lo && x < lo) x = lo;
    if (has_hi && x > hi) x = hi;
    return x;
  }
};

// cond ? a : b, for values of any one type.
struct WhereOp {
  template <typename T>
  THD_HOST_DEVICE T operator()(bool cond, T a, T b) const {
    return cond ? a : b;
  }
};

}  // namespace thd::functors
