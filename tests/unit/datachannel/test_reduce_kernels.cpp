// The reduction kernels of the collectives against a scalar reference written
// here, for every dtype and op: aliasing, odd lengths, wrapping integers, NaN,
// bool bytes, and the op/dtype rules.
#include <gtest/gtest.h>
#include <thd/datachannel.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "datachannel/collectives/reduce_kernels.h"
#include "datachannel/reduce_reference.h"
#include "datachannel/test_util.h"
#include "expect_throw.h"
#include "tensor/dispatch.h"

namespace thd {
namespace {

using detail::check_reduce_op;
using detail::finish_reduce;
using detail::reduce_into;

using test::cat;

constexpr ReduceOp kAllOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max,
                                ReduceOp::Avg, ReduceOp::BAnd, ReduceOp::BOr, ReduceOp::BXor};
constexpr DType kAllDTypes[] = {kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};

bool applies(DType dtype, ReduceOp op) {
  if (op == ReduceOp::Avg) return is_floating_point(dtype);
  if (op == ReduceOp::BAnd || op == ReduceOp::BOr || op == ReduceOp::BXor) return !is_floating_point(dtype);
  return true;
}


// Elements of any dtype, bool included (std::vector<bool> has no data()).
template <typename T>
class Buffer {
 public:
  explicit Buffer(size_t n) : size_(n), data_(new T[n + 1]()) {}
  Buffer(const T* from, size_t n) : Buffer(n) { std::copy(from, from + n, data_.get()); }
  size_t size() const { return size_; }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  size_t size_;
  std::unique_ptr<T[]> data_;
};

// Values that exercise each type: wrapping integers, fractions, NaN, infinities.
template <typename T>
Buffer<T> values(size_t n, uint64_t seed) {
  Buffer<T> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if constexpr (std::is_same_v<T, bool>) {
      v[i] = (x & 1) != 0;
    } else if constexpr (detail::is_float_v<T>) {
      const double d = static_cast<double>(static_cast<int64_t>(x % 2001) - 1000) / 64.0;
      v[i] = T(static_cast<detail::compute_t<T>>(d));
      if (i % 97 == 5) v[i] = T(std::numeric_limits<detail::compute_t<T>>::quiet_NaN());
      if (i % 89 == 7) v[i] = T(std::numeric_limits<detail::compute_t<T>>::infinity());
    } else {
      v[i] = static_cast<T>(x);
    }
  }
  return v;
}

// Bitwise equality, except that any NaN equals any NaN.
template <typename T>
void expect_same(const Buffer<T>& got, const Buffer<T>& want, DType dtype, ReduceOp op, const char* how) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if constexpr (detail::is_float_v<T>) {
      const double g = static_cast<double>(static_cast<detail::compute_t<T>>(got[i]));
      const double w = static_cast<double>(static_cast<detail::compute_t<T>>(want[i]));
      if (std::isnan(g) && std::isnan(w)) continue;
    }
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      ADD_FAILURE() << dtype << " " << reduce_op_name(op) << " (" << how << ") differs at " << i << " of "
                    << got.size();
      return;
    }
  }
}

template <typename T>
void check_kernel(DType dtype, ReduceOp op, size_t n) {
  // Offsets by one element: the kernels must not assume alignment.
  const Buffer<T> a_storage = values<T>(n + 1, 1), b_storage = values<T>(n + 1, 2);
  const T* a = a_storage.data() + 1;
  const T* b = b_storage.data() + 1;
  Buffer<T> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = test::reduce_reference(a[i], b[i], op);

  Buffer<T> out(n);  // three operands
  reduce_into(out.data(), a, b, n, dtype, op);
  expect_same(out, want, dtype, op, "out = a op b");

  Buffer<T> acc(a, n);  // out aliases a
  reduce_into(acc.data(), b, n, dtype, op);
  expect_same(acc, want, dtype, op, "acc op= in");

  Buffer<T> into_b(b, n);  // out aliases b
  reduce_into(into_b.data(), a, into_b.data(), n, dtype, op);
  expect_same(into_b, want, dtype, op, "b = a op b");
}

TEST(ReduceKernels, EveryDTypeAndOpMatchesTheReference) {
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllOps) {
      if (!applies(dtype, op)) continue;
      for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{511}, size_t{513}, size_t{1031}}) {
        detail::dispatch_all(dtype, "test", [&](auto tag) {
          using T = typename decltype(tag)::type;
          check_kernel<T>(dtype, op, n);
        });
      }
    }
  }
}

TEST(ReduceKernels, IntegersWrapAround) {
  std::vector<int8_t> a{127, -128, 100, -1}, b{1, -1, 100, 127};
  reduce_into(a.data(), b.data(), a.size(), kInt8, ReduceOp::Sum);
  EXPECT_EQ(a, (std::vector<int8_t>{-128, 127, -56, 126}));

  std::vector<uint8_t> u{255, 16, 0}, v{2, 16, 255};
  reduce_into(u.data(), v.data(), u.size(), kUInt8, ReduceOp::Prod);
  EXPECT_EQ(u, (std::vector<uint8_t>{254, 0, 0}));

  std::vector<int32_t> p{std::numeric_limits<int32_t>::min(), 65536}, q{-1, 65536};
  reduce_into(p.data(), q.data(), p.size(), kInt32, ReduceOp::Prod);
  EXPECT_EQ(p, (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), 0}));

  std::vector<int64_t> s{std::numeric_limits<int64_t>::max()}, t{1};
  reduce_into(s.data(), t.data(), 1, kInt64, ReduceOp::Sum);
  EXPECT_EQ(s[0], std::numeric_limits<int64_t>::min());
}

template <typename T>
void check_nan_propagates() {
  const DType dtype = dtype_of_v<T>;
  const T nan = T(std::numeric_limits<detail::compute_t<T>>::quiet_NaN());
  for (ReduceOp op : {ReduceOp::Min, ReduceOp::Max}) {
    std::vector<T> a{nan, T(1.0f), nan, T(2.0f)}, b{T(1.0f), nan, nan, T(3.0f)};
    reduce_into(a.data(), b.data(), a.size(), dtype, op);
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(std::isnan(static_cast<double>(static_cast<detail::compute_t<T>>(a[i]))))
          << dtype << " " << reduce_op_name(op) << " element " << i;
    }
    EXPECT_EQ(static_cast<double>(static_cast<detail::compute_t<T>>(a[3])), op == ReduceOp::Min ? 2.0 : 3.0);
  }
}

TEST(ReduceKernels, MinAndMaxPropagateNaNLikeTorch) {
  check_nan_propagates<float>();
  check_nan_propagates<double>();
  check_nan_propagates<Half>();
  check_nan_propagates<BFloat16>();
}

TEST(ReduceKernels, BoolIsLogicalAndAnyNonzeroByteIsTrue) {
  const std::vector<uint8_t> a{0, 0, 1, 1, 2, 0x80}, b{0, 1, 0, 1, 1, 0x80};
  auto run = [&](ReduceOp op) {
    std::vector<uint8_t> out(a.size());
    reduce_into(out.data(), a.data(), b.data(), a.size(), kBool, op);
    return out;
  };
  const std::vector<uint8_t> any{0, 1, 1, 1, 1, 1}, all{0, 0, 0, 1, 1, 1}, odd{0, 1, 1, 0, 0, 0};
  EXPECT_EQ(run(ReduceOp::Sum), any);
  EXPECT_EQ(run(ReduceOp::Max), any);
  EXPECT_EQ(run(ReduceOp::BOr), any);
  EXPECT_EQ(run(ReduceOp::Prod), all);
  EXPECT_EQ(run(ReduceOp::Min), all);
  EXPECT_EQ(run(ReduceOp::BAnd), all);
  EXPECT_EQ(run(ReduceOp::BXor), odd);
}

TEST(ReduceKernels, OpsThatDoNotApplyAreTypeErrorsNamingBoth) {
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllOps) {
      if (applies(dtype, op)) {
        EXPECT_NO_THROW(check_reduce_op(dtype, op, "all_reduce"));
        continue;
      }
      const std::string needle = cat(reduce_op_name(op), " does not apply to ", dtype_name(dtype));
      THD_EXPECT_THROW_MSG(check_reduce_op(dtype, op, "all_reduce"), TypeError, needle);
      uint64_t x = 0, y = 0;
      THD_EXPECT_THROW_MSG(reduce_into(&x, &y, 1, dtype, op), TypeError, needle);
    }
  }
  THD_EXPECT_THROW_MSG(check_reduce_op(kInt32, ReduceOp::Avg, "all_reduce"), TypeError, "all_reduce");
}

TEST(ReduceKernels, FinishReduceDividesOnlyForAvg) {
  std::vector<float> f{3.0f, -6.0f, 1.0f};
  finish_reduce(f.data(), f.size(), kFloat32, ReduceOp::Sum, 3);
  EXPECT_EQ(f, (std::vector<float>{3.0f, -6.0f, 1.0f}));
  finish_reduce(f.data(), f.size(), kFloat32, ReduceOp::Avg, 3);
  EXPECT_EQ(f, (std::vector<float>{1.0f, -2.0f, 1.0f / 3.0f}));

  std::vector<double> d{7.0};
  finish_reduce(d.data(), 1, kFloat64, ReduceOp::Avg, 7);
  EXPECT_EQ(d[0], 1.0);

  std::vector<Half> h(1030, Half(6.0f));
  h[1029] = Half(5.0f);
  finish_reduce(h.data(), h.size(), kFloat16, ReduceOp::Avg, 4);
  EXPECT_EQ(static_cast<float>(h[0]), 1.5f);
  EXPECT_EQ(static_cast<float>(h[1028]), 1.5f);
  EXPECT_EQ(static_cast<float>(h[1029]), 1.25f);

  std::vector<BFloat16> bf{BFloat16(10.0f)};
  finish_reduce(bf.data(), 1, kBFloat16, ReduceOp::Avg, 5);
  EXPECT_EQ(static_cast<float>(bf[0]), 2.0f);

  std::vector<int32_t> i{4};
  finish_reduce(i.data(), 1, kInt32, ReduceOp::Max, 2);
  EXPECT_EQ(i[0], 4);
  THD_EXPECT_THROW_MSG(finish_reduce(i.data(), 1, kInt32, ReduceOp::Avg, 2), TypeError, "avg");
}

}  // namespace
}  // namespace thd
