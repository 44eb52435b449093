// Families of dtypes an op accepts, shared by the CPU dispatch (dispatch.h) and the
// CUDA kernels (cuda/device_types.cuh), which must not pull in the CPU's headers.
#pragma once

#include <thd/dtype.h>

namespace thd::detail {

// Which dtypes an op accepts.
enum DTypeSet : unsigned {
  kBoolSet = 1u << 0,
  kIntegerSet = 1u << 1,   // uint8 int8 int32 int64
  kFloatingSet = 1u << 2,  // float16 bfloat16 float32 float64
  kAllSet = kBoolSet | kIntegerSet | kFloatingSet,
  kNumericSet = kIntegerSet | kFloatingSet,
};

inline bool dtype_in(DType d, unsigned set) {
  if (d == DType::Bool) return set & kBoolSet;
  if (is_floating_point(d)) return set & kFloatingSet;
  return set & kIntegerSet;
}

[[noreturn]] void throw_unsupported_dtype(const char* op, DType dtype, unsigned set);

}  // namespace thd::detail
