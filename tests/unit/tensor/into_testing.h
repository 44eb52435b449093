// Helpers of the tests of the ops written into an existing tensor (tensor/into*.h).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include <thd/tensor.h>

namespace thd::into_testing {

inline bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

// A tensor of `shape` and `dtype` with varied values (negative ones too, but no
// zeros, so that div and pow stay finite).
inline Tensor sample(const Shape& shape, DType dtype, double shift = 0) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  Tensor t = Tensor::arange(0, n, 1, kFloat64).mul(0.37).add(shift).sin().mul(5).add(0.5).reshape(shape);
  if (dtype == kBool) return t.gt(0);
  if (!is_floating_point(dtype)) t = t.mul(3).add(t.lt(0).to(kFloat64).mul(-1)).add(t.ge(0).to(kFloat64));
  return t.to(dtype);
}

// `out` after op_into, compared with `expected`: written with the same bytes.
inline ::testing::AssertionResult writes(const std::function<bool(const Tensor&)>& op_into, const Tensor& expected) {
  Tensor out = Tensor::full(expected.shape(), 7, expected.dtype());
  if (!op_into(out)) return ::testing::AssertionFailure() << "did not write";
  if (!same_bytes(out, expected)) return ::testing::AssertionFailure() << "wrote other values";
  return ::testing::AssertionSuccess();
}

// op_into refuses `out` and leaves it as it was.
inline ::testing::AssertionResult refuses(const std::function<bool(const Tensor&)>& op_into, const Tensor& out) {
  const Tensor before = out.clone();
  if (op_into(out)) return ::testing::AssertionFailure() << "wrote";
  if (!same_bytes(out, before)) return ::testing::AssertionFailure() << "refused but changed out";
  return ::testing::AssertionSuccess();
}

}  // namespace thd::into_testing
