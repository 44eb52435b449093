#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include <thd/tensor.h>

#include "tensor/reference.h"

namespace thd {
namespace {

using test::close;
using test::values;

// Broadcast reference: out[idx] = f(a[idx mapped], b[idx mapped]) in double.
std::vector<double> ref_binary(const Tensor& a, const Tensor& b, const Shape& out_shape,
                               const std::function<double(double, double)>& f) {
  std::vector<double> va = values(a), vb = values(b);
  int64_t n = 1;
  for (int64_t s : out_shape) n *= s;
  std::vector<double> out;
  const size_t nd = out_shape.size();
  auto offset_in = [&](const Tensor& t, const std::vector<int64_t>& idx) {
    int64_t off = 0, mul = 1;
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      int64_t od = d + static_cast<int64_t>(nd) - t.dim();
      int64_t i = t.shape()[d] == 1 ? 0 : idx[od];
      off += i * mul;
      mul *= t.shape()[d];
    }
    return off;
  };
  std::vector<int64_t> idx(nd, 0);
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(f(va[offset_in(a, idx)], vb[offset_in(b, idx)]));
    for (int64_t d = static_cast<int64_t>(nd) - 1; d >= 0; --d) {
      if (++idx[d] < out_shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<double> rounded(DType dtype, std::vector<double> v) {
  for (auto& x : v) x = test::round_to(dtype, x);
  return v;
}

class BinaryByDType : public ::testing::TestWithParam<DType> {};

TEST_P(BinaryByDType, AddSubMulBroadcast) {
  DType dt = GetParam();
  Tensor a = test::sample_tensor({2, 3, 4}, dt, 1);
  Tensor b = test::sample_tensor({3, 1}, dt, 2);
  Shape out{2, 3, 4};
  Tensor s = a + b;
  EXPECT_EQ(s.dtype(), dt);
  EXPECT_EQ(s.shape(), out);
  if (dt == kBool) {
    EXPECT_TRUE(close(s, ref_binary(a, b, out, [](double x, double y) { return double(x || y); })));
    EXPECT_TRUE(close(a * b, ref_binary(a, b, out, [](double x, double y) { return double(x && y); })));
    THD_EXPECT_THROW_MSG(a - b, TypeError, "bool");
    return;
  }
  EXPECT_TRUE(close(s, rounded(dt, ref_binary(a, b, out, std::plus<>()))));
  if (dt != kUInt8) {
    EXPECT_TRUE(close(a - b, rounded(dt, ref_binary(a, b, out, std::minus<>()))));
  }
  EXPECT_TRUE(close(a * b, rounded(dt, ref_binary(a, b, out, std::multiplies<>()))));
  EXPECT_TRUE(close(b * a, rounded(dt, ref_binary(b, a, out, std::multiplies<>()))));
}

TEST_P(BinaryByDType, DivIsTrueDivision) {
  DType dt = GetParam();
  if (dt == kBool) return;
  Tensor a = test::sample_tensor({4, 5}, dt, 3);
  Tensor b = test::sample_tensor({5}, dt, 4, /*positive=*/true);
  Tensor q = a / b;
  DType expect = is_floating_point(dt) ? dt : kFloat32;
  EXPECT_EQ(q.dtype(), expect);
  EXPECT_TRUE(close(q, rounded(expect, ref_binary(a, b, {4, 5}, std::divides<>()))));
}

TEST_P(BinaryByDType, PowMaximumMinimum) {
  DType dt = GetParam();
  if (dt == kBool) return;
  Tensor a = test::sample_tensor({3, 4}, dt, 5, true);
  Tensor e = test::make({4}, dt, {0, 1, 2, 3});
  EXPECT_TRUE(close(a.pow(e), rounded(dt, ref_binary(a, e, {3, 4}, [](double x, double y) {
                      return std::pow(x, y);
                    })),
                    is_floating_point(dt) ? 4 * test::tolerance(dt) : 0));
  Tensor b = test::sample_tensor({3, 4}, dt, 6);
  EXPECT_TRUE(close(a.maximum(b), ref_binary(a, b, {3, 4}, [](double x, double y) { return std::max(x, y); })));
  EXPECT_TRUE(close(a.minimum(b), ref_binary(a, b, {3, 4}, [](double x, double y) { return std::min(x, y); })));
}

TEST_P(BinaryByDType, InPlaceBroadcastsOtherIntoSelf) {
  DType dt = GetParam();
  if (dt == kBool) return;
  Tensor a = test::sample_tensor({3, 4}, dt, 7);
  Tensor b = test::sample_tensor({4}, dt, 8);
  std::vector<double> want = rounded(dt, ref_binary(a, b, {3, 4}, std::plus<>()));
  void* before = a.data_ptr();
  Tensor& r = a.add_(b);
  EXPECT_EQ(&r, &a);
  EXPECT_EQ(a.data_ptr(), before);
  EXPECT_TRUE(close(a, want));
  want = rounded(dt, ref_binary(a, b, {3, 4}, std::multiplies<>()));
  a *= b;
  EXPECT_TRUE(close(a, want));
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, BinaryByDType, ::testing::ValuesIn(test::all_dtypes()),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Binary, PromotesMixedDTypes) {
  Tensor i = test::make({3}, kInt32, {1, 2, 3});
  Tensor f = test::make({3}, kFloat64, {0.5, 0.25, 2});
  Tensor r = i + f;
  EXPECT_EQ(r.dtype(), kFloat64);
  EXPECT_TRUE(close(r, {1.5, 2.25, 5}));
  Tensor u = test::make({2}, kUInt8, {200, 100});
  Tensor s8 = test::make({2}, kInt8, {-100, 50});
  Tensor us = u + s8;
  EXPECT_EQ(us.dtype(), kInt32);
  EXPECT_TRUE(close(us, {100, 150}));
  EXPECT_EQ((test::make({2}, kFloat16, {1, 2}) + test::make({2}, kBFloat16, {1, 2})).dtype(), kFloat32);
}

TEST(Binary, ScalarOperandsFollowTorchPromotion) {
  Tensor i = test::make({3}, kInt32, {1, 2, 3});
  Tensor r = i * 2;
  EXPECT_EQ(r.dtype(), kInt32);
  EXPECT_TRUE(close(r, {2, 4, 6}));
  Tensor f = i * 2.5;
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_TRUE(close(f, {2.5, 5, 7.5}));
  EXPECT_TRUE(close(10 - i, {9, 8, 7}));
  EXPECT_TRUE(close(Scalar(1) / test::make({2}, kFloat32, {2, 4}), {0.5, 0.25}));
  Tensor h = test::make({2}, kFloat16, {1, 2});
  EXPECT_EQ((h + 1.5).dtype(), kFloat16);
  Tensor bl = test::make({2}, kBool, {1, 0});
  EXPECT_EQ((bl + 1).dtype(), kInt64);
  EXPECT_TRUE(close(bl + 1, {2, 1}));
  Tensor in = test::make({2}, kInt64, {1, 2});
  in += 3;
  EXPECT_TRUE(close(in, {4, 5}));
  THD_EXPECT_THROW_MSG(in += 0.5, TypeError, "can't be cast to the desired output type int64");
  EXPECT_TRUE(close(in, {4, 5}));
}

TEST(Binary, InPlaceChecksShapeAndDType) {
  Tensor a = Tensor::ones({3});
  THD_EXPECT_THROW_MSG(a.add_(Tensor::ones({2, 3})), ShapeError,
                       "output with shape [3] doesn't match the broadcast shape [2, 3]");
  Tensor i = Tensor::ones({3}, kInt32);
  THD_EXPECT_THROW_MSG(i.div_(2), TypeError, "float32 can't be cast");
  THD_EXPECT_THROW_MSG(i.add_(Tensor::ones({3}, kFloat32)), TypeError, "can't be cast");
  EXPECT_TRUE(close(i, {1, 1, 1}));
  // An int32 tensor may take an int64 operand in place; the result is stored as int32.
  i.add_(test::make({3}, kInt64, {1, 2, 3}));
  EXPECT_EQ(i.dtype(), kInt32);
  EXPECT_TRUE(close(i, {2, 3, 4}));
  // Writing into an expanded view would race on shared elements.
  Tensor e = Tensor::zeros({1}).expand({4});
  THD_EXPECT_THROW_MSG(e.add_(1), ValueError, "single memory location");
}

TEST(Binary, SubtractionRefusesEveryBoolOperandAsTorch) {
  const Tensor mask = Tensor::ones({3}, kBool);
  const Tensor ints = Tensor::ones({3}, kInt64);
  THD_EXPECT_THROW_MSG(mask - mask, TypeError, "two bool tensors");
  THD_EXPECT_THROW_MSG(mask - ints, TypeError, "with a bool tensor is not supported");
  THD_EXPECT_THROW_MSG(ints - mask, TypeError, "with a bool tensor is not supported");
  THD_EXPECT_THROW_MSG(mask - Tensor::ones({3}), TypeError, "with a bool tensor is not supported");
  THD_EXPECT_THROW_MSG(mask - 1, TypeError, "with a bool tensor is not supported");
  THD_EXPECT_THROW_MSG(1 - mask, TypeError, "with a bool tensor is not supported");
  THD_EXPECT_THROW_MSG(ints - Scalar(true), TypeError, "with a bool tensor is not supported");
  Tensor target = Tensor::ones({3}, kInt64);
  THD_EXPECT_THROW_MSG(target.sub_(mask), TypeError, "with a bool tensor is not supported");
  EXPECT_TRUE(close(target, {1, 1, 1}));
  // The other ops take bools as before.
  EXPECT_TRUE(close(mask + ints, {2, 2, 2}));
}

TEST(Binary, ShapeErrorsNameBothShapes) {
  Tensor a = Tensor::ones({2, 3}), b = Tensor::ones({4});
  THD_EXPECT_THROW_MSG(a + b, ShapeError, "add: shapes [2, 3] and [4] are not broadcastable");
  THD_EXPECT_THROW_MSG(a.mul(b), ShapeError, "mul: ");
  THD_EXPECT_THROW_MSG(a + Tensor(), ValueError, "undefined");
}

TEST(Binary, SignedOverflowWraps) {
  Tensor a = test::make({2}, kInt32, {std::numeric_limits<int32_t>::max(), -5});
  Tensor r = a + 1;
  EXPECT_EQ(r.to_vector<int32_t>(), (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -4}));
  Tensor m = test::make({1}, kInt8, {100}) * 3;
  EXPECT_EQ(m.to_vector<int8_t>()[0], static_cast<int8_t>(300 - 256));
  Tensor u = test::make({1}, kUInt8, {3}) - 5;
  EXPECT_EQ(u.to_vector<uint8_t>()[0], 254);
}

TEST(Binary, IntegerPow) {
  Tensor a = test::make({4}, kInt64, {2, 3, -2, 0});
  EXPECT_EQ(a.pow(3).to_vector<int64_t>(), (std::vector<int64_t>{8, 27, -8, 0}));
  EXPECT_EQ(a.pow(0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 1}));
  THD_EXPECT_THROW_MSG(a.pow(-1), ValueError, "negative integer powers");
  Tensor e = test::make({4}, kInt64, {1, -1, 1, 1});
  THD_EXPECT_THROW_MSG(a.pow_(e), ValueError, "negative integer powers");
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{2, 3, -2, 0}));  // untouched
  EXPECT_EQ(a.pow(0.5).dtype(), kFloat32);
  THD_EXPECT_THROW_MSG(test::make({1}, kBool, {1}).pow(test::make({1}, kBool, {1})), TypeError, "bool");
}

TEST(Binary, MaximumMinimumPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = test::make({3}, kFloat32, {1, nan, 3});
  Tensor b = test::make({3}, kFloat32, {nan, 2, 1});
  std::vector<double> mx = values(a.maximum(b)), mn = values(a.minimum(b));
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]));
  EXPECT_EQ(mx[2], 3);
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]));
  EXPECT_EQ(mn[2], 1);
}

TEST(Binary, NonContiguousInputs) {
  Tensor base = test::sample_tensor({6, 8}, kFloat64, 11);
  Tensor a = base.t();                  // [8, 6] transposed
  Tensor b = base.slice(1, 0, 8, 2).t();  // [4, 6] strided, wrong rows on purpose below
  Tensor c = test::sample_tensor({8, 1}, kFloat64, 12).expand({8, 6});
  EXPECT_TRUE(close(a + c, ref_binary(a, c, {8, 6}, std::plus<>())));
  EXPECT_TRUE(close(b * 2.0, ref_binary(b, test::make({}, kFloat64, {2}), {4, 6}, std::multiplies<>())));
  // In place on a transposed view writes through to the base.
  std::vector<double> want = ref_binary(a, c, {8, 6}, std::minus<>());
  a.sub_(c);
  EXPECT_TRUE(close(a, want));
}

TEST(Binary, InPlaceWithOverlappingOperand) {
  Tensor a = test::make({3, 3}, kFloat32, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  std::vector<double> want = ref_binary(a, a.t(), {3, 3}, std::plus<>());
  a.add_(a.t());  // reads elements it also writes: must see the original values
  EXPECT_TRUE(close(a, want));
  Tensor v = test::make({6}, kFloat32, {1, 2, 3, 4, 5, 6});
  v.slice(0, 1, 6).add_(v.slice(0, 0, 5));
  EXPECT_TRUE(close(v, {1, 3, 5, 7, 9, 11}));
}

TEST(Binary, EmptyAndZeroDim) {
  Tensor e = Tensor::ones({0, 3}) + Tensor::ones({3});
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  Tensor s = Tensor::full({}, 2.0f) * Tensor::full({}, 3.0f);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<float>(), 6.0f);
  EXPECT_EQ((Tensor::full({}, 2.0f) + Tensor::ones({2, 2})).shape(), (Shape{2, 2}));
}

TEST(Binary, LargeTensorsUseEveryChunk) {
  // Big enough to be split across the thread pool; every element checked.
  const int64_t n = (1 << 20) + 17;
  Tensor a = Tensor::arange(n, kFloat64);
  Tensor b = Tensor::full({n}, 0.5, kFloat64);
  std::vector<double> r = values(a + b);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(r[i], static_cast<double>(i) + 0.5) << i;
  Tensor m = Tensor::arange(n, kInt64).view({n}).slice(0, 0, n, 3);
  std::vector<double> mm = values(m * m);
  for (size_t i = 0; i < mm.size(); ++i) ASSERT_EQ(mm[i], 9.0 * i * i) << i;
}

}  // namespace
}  // namespace thd
