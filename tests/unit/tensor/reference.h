// Test helpers: read tensors element by element straight from memory (without the
// library's own copy kernels) and compare against references computed in double.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <thd/tensor.h>

#include "expect_throw.h"

namespace thd::test {

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = {kBool,    kUInt8,    kInt8,    kInt32,  kInt64,
                                       kFloat16, kBFloat16, kFloat32, kFloat64};
  return v;
}
inline const std::vector<DType>& numeric_dtypes() {
  static const std::vector<DType> v = {kUInt8,    kInt8,    kInt32,   kInt64,
                                       kFloat16, kBFloat16, kFloat32, kFloat64};
  return v;
}
inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> v = {kFloat16, kBFloat16, kFloat32, kFloat64};
  return v;
}

inline int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// Row-major multi-index of flat position i, and back.
inline std::vector<int64_t> unravel(int64_t i, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

inline int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + idx[d];
  return off;
}

// One element at `offset` (in elements from the storage start), as double.
inline double read_element(const void* base, DType dtype, int64_t index) {
  const char* p = static_cast<const char*>(base) + index * static_cast<int64_t>(element_size(dtype));
  switch (dtype) {
    case kBool: return *reinterpret_cast<const bool*>(p) ? 1.0 : 0.0;
    case kUInt8: return *reinterpret_cast<const uint8_t*>(p);
    case kInt8: return *reinterpret_cast<const int8_t*>(p);
    case kInt32: return *reinterpret_cast<const int32_t*>(p);
    case kInt64: return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
    case kFloat16: return static_cast<float>(*reinterpret_cast<const Half*>(p));
    case kBFloat16: return static_cast<float>(*reinterpret_cast<const BFloat16*>(p));
    case kFloat32: return *reinterpret_cast<const float*>(p);
    case kFloat64: return *reinterpret_cast<const double*>(p);
  }
  return NAN;
}

// All elements in row-major order of the tensor's shape, following its strides.
inline std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  const int64_t n = t.numel();
  out.reserve(static_cast<size_t>(n));
  std::vector<int64_t> idx(static_cast<size_t>(t.dim()), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int64_t d = 0; d < t.dim(); ++d) off += idx[d] * t.strides()[d];
    out.push_back(read_element(t.data_ptr(), t.dtype(), off));
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      if (++idx[d] < t.shape()[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

inline void write_element(void* base, DType dtype, int64_t index, double v) {
  char* p = static_cast<char*>(base) + index * static_cast<int64_t>(element_size(dtype));
  switch (dtype) {
    case kBool: *reinterpret_cast<bool*>(p) = v != 0; break;
    case kUInt8: *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(v); break;
    case kInt8: *reinterpret_cast<int8_t*>(p) = static_cast<int8_t>(v); break;
    case kInt32: *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
    case kInt64: *reinterpret_cast<int64_t*>(p) = static_cast<int64_t>(v); break;
    case kFloat16: *reinterpret_cast<Half*>(p) = Half(static_cast<float>(v)); break;
    case kBFloat16: *reinterpret_cast<BFloat16*>(p) = BFloat16(static_cast<float>(v)); break;
    case kFloat32: *reinterpret_cast<float*>(p) = static_cast<float>(v); break;
    case kFloat64: *reinterpret_cast<double*>(p) = v; break;
  }
}

// A contiguous tensor holding `vals` (row-major) converted to dtype.
inline Tensor make(const Shape& shape, DType dtype, const std::vector<double>& vals) {
  Tensor t = Tensor::empty(shape, dtype);
  EXPECT_EQ(static_cast<int64_t>(vals.size()), t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) write_element(t.data_ptr(), dtype, i, vals[i]);
  return t;
}

// Deterministic test data that every dtype can hold exactly: small integers, and for
// floating dtypes quarter steps; bool gets 0/1. Never depends on thd's own RNG.
inline std::vector<double> sample(int64_t n, DType dtype, uint32_t seed = 1, bool positive = false) {
  std::mt19937 rng(seed);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) {
    if (dtype == kBool) {
      x = static_cast<double>(rng() % 2);
    } else if (dtype == kUInt8 || positive) {
      x = static_cast<double>(rng() % 10 + (positive ? 1 : 0));
      if (is_floating_point(dtype)) x += static_cast<double>(rng() % 4) * 0.25;
    } else {
      x = static_cast<double>(static_cast<int>(rng() % 19) - 9);
      if (is_floating_point(dtype)) x += static_cast<double>(rng() % 4) * 0.25;
    }
  }
  return v;
}

inline Tensor sample_tensor(const Shape& shape, DType dtype, uint32_t seed = 1, bool positive = false) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return make(shape, dtype, sample(n, dtype, seed, positive));
}

// Relative tolerance that a result computed in `dtype` can be held to.
inline double tolerance(DType dtype) {
  switch (dtype) {
    case kFloat16: return 2e-3;
    case kBFloat16: return 1.6e-2;
    case kFloat32: return 2e-6;
    case kFloat64: return 1e-12;
    default: return 0.0;
  }
}

// Rounds a double reference to what storing it in dtype gives, so comparisons for
// integer dtypes are exact and for 16-bit floats account for the final rounding.
inline double round_to(DType dtype, double v) {
  Tensor t = Tensor::empty({}, dtype);
  write_element(t.data_ptr(), dtype, 0, v);
  return read_element(t.data_ptr(), dtype, 0);
}

inline ::testing::AssertionResult close(const Tensor& got, const std::vector<double>& expected,
                                        double rtol = -1, double atol = -1) {
  if (!got.defined()) return ::testing::AssertionFailure() << "tensor is undefined";
  if (rtol < 0) rtol = tolerance(got.dtype());
  if (atol < 0) atol = rtol;
  std::vector<double> v = values(got);
  if (v.size() != expected.size()) {
    return ::testing::AssertionFailure() << "numel " << v.size() << " != expected " << expected.size();
  }
  for (size_t i = 0; i < v.size(); ++i) {
    double e = expected[i];
    bool ok = (std::isnan(e) && std::isnan(v[i])) || (std::isinf(e) && v[i] == e) ||
              std::abs(v[i] - e) <= atol + rtol * std::abs(e);
    if (!ok) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << v[i] << ", expected "
                                           << e << " (dtype " << got.dtype() << ")";
    }
  }
  return ::testing::AssertionSuccess();
}


}  // namespace thd::test
