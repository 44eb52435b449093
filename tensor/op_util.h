// Helpers every tensor op uses: scalars as typed values, output checks, aliasing.
#pragma once

#include <initializer_list>

#include <thd/tensor.h>

#include "tensor/dispatch.h"

namespace thd::detail {

// The scalar as storage type T (saturating like convert<>).
template <typename T>
T scalar_to(const Scalar& s) {
  if (s.is_floating_point()) return convert<T>(s.to_double());
  if (s.is_bool()) return convert<T>(s.to_bool());
  return convert<T>(s.to_int64());
}

// Throws ValueError naming op when s overflows dtype, as torch's checked_convert:
// fractions truncate, infinities fit floating types, negative integers wrap into
// unsigned types (two's complement), any value fits bool (nonzero is true).
void check_value_fits(const Scalar& s, DType dtype, const char* op);

// A 0-dim tensor holding s as dtype.
Tensor scalar_tensor(const Scalar& s, DType dtype);

// Throws TypeError naming op unless can_cast(result, out).
void check_can_cast(DType result, DType out, const char* op);

// Throws unless t may be written elementwise: no two of its elements share memory
// (an expanded tensor cannot be written in place).
void check_writable(const Tensor& t, const char* op);

// True when a and b address some common bytes.
bool memory_overlaps(const Tensor& a, const Tensor& b);
// True when a and b are the same view (same storage, offset, shape, strides, dtype).
bool same_view(const Tensor& a, const Tensor& b);
// An input that will be read while `out` is written: returned as is unless it shares
// memory with out without being exactly out, in which case a copy is returned so the
// op never reads elements it has already overwritten.
Tensor unalias_input(const Tensor& in, const Tensor& out);

// Throws ValueError naming op unless every defined tensor is on the first one's
// device ("expected all tensors on one device, got cuda:0 and cpu").
void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors);
// Throws NotImplementedError naming op and t's device unless t is on the CPU: the
// guard of every op that has no CUDA kernel, before it touches t's memory.
void check_cpu_kernel(const char* op, const Tensor& t);

// The type promotion state of torch: dimensioned tensors outrank 0-dim tensors,
// which outrank plain scalars, unless the lower rank is of a higher category
// (bool < integer < floating).
DType combine_categories(DType higher, DType lower);

}  // namespace thd::detail
