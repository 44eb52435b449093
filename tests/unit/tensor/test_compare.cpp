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

class CompareByDType : public ::testing::TestWithParam<DType> {};

TEST_P(CompareByDType, AllComparisons) {
  DType dt = GetParam();
  Tensor a = test::sample_tensor({3, 4}, dt, 31);
  Tensor b = test::sample_tensor({4}, dt, 32);
  std::vector<double> va = values(a), vb = values(b);
  auto ref = [&](const std::function<bool(double, double)>& f) {
    std::vector<double> out;
    for (int64_t i = 0; i < 12; ++i) out.push_back(f(va[i], vb[i % 4]) ? 1 : 0);
    return out;
  };
  EXPECT_EQ(a.eq(b).dtype(), kBool);
  EXPECT_TRUE(close(a.eq(b), ref(std::equal_to<>())));
  EXPECT_TRUE(close(a.ne(b), ref(std::not_equal_to<>())));
  EXPECT_TRUE(close(a.lt(b), ref(std::less<>())));
  EXPECT_TRUE(close(a.le(b), ref(std::less_equal<>())));
  EXPECT_TRUE(close(a.gt(b), ref(std::greater<>())));
  EXPECT_TRUE(close(a.ge(b), ref(std::greater_equal<>())));
  std::vector<double> gt1;
  for (double x : va) gt1.push_back(x > 1 ? 1 : 0);
  EXPECT_TRUE(close(a.gt(1), gt1));
}

TEST_P(CompareByDType, WhereSelects) {
  DType dt = GetParam();
  Tensor cond = test::sample_tensor({2, 3}, kBool, 33);
  Tensor a = test::sample_tensor({2, 3}, dt, 34);
  Tensor b = test::sample_tensor({3}, dt, 35);
  Tensor r = where(cond, a, b);
  EXPECT_EQ(r.dtype(), dt);
  std::vector<double> c = values(cond), va = values(a), vb = values(b), want;
  for (int64_t i = 0; i < 6; ++i) want.push_back(c[i] != 0 ? va[i] : vb[i % 3]);
  EXPECT_TRUE(close(r, want));
}

TEST_P(CompareByDType, Clamp) {
  DType dt = GetParam();
  Tensor x = test::sample_tensor({10}, dt, 36);
  if (dt == kBool) {
    THD_EXPECT_THROW_MSG(x.clamp(0, 1), TypeError, "bool");
    return;
  }
  std::vector<double> v = values(x), want, want_lo;
  for (double e : v) {
    want.push_back(std::min(std::max(e, 2.0), 6.0));
    want_lo.push_back(std::max(e, 3.0));
  }
  EXPECT_TRUE(close(x.clamp(2, 6), want));
  EXPECT_TRUE(close(x.clamp(3, std::nullopt), want_lo));
  Tensor y = x.clone();
  y.clamp_(2, 6);
  EXPECT_EQ(y.dtype(), dt);
  EXPECT_TRUE(close(y, want));
  // min > max: everything becomes max.
  EXPECT_TRUE(close(x.clamp(7, 5), std::vector<double>(10, 5.0)));
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, CompareByDType, ::testing::ValuesIn(test::all_dtypes()),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Compare, PromotesBeforeComparing) {
  Tensor i = test::make({3}, kInt32, {1, 2, 3});
  EXPECT_TRUE(close(i.lt(2.5), {1, 1, 0}));
  EXPECT_TRUE(close(i.eq(test::make({3}, kFloat64, {1, 2.5, 3})), {1, 0, 1}));
  Tensor u = test::make({2}, kUInt8, {255, 0});
  EXPECT_TRUE(close(u.gt(test::make({2}, kInt8, {-1, -1})), {1, 1}));
}

TEST(Compare, NaNComparesUnequal) {
  Tensor x = test::make({2}, kFloat32, {std::nan(""), 1});
  EXPECT_TRUE(close(x.eq(x), {0, 1}));
  EXPECT_TRUE(close(x.ne(x), {1, 0}));
  EXPECT_TRUE(std::isnan(values(x.clamp(0, 0.5))[0]));
}

TEST(Compare, WhereErrorsAndScalars) {
  Tensor c = test::make({3}, kBool, {1, 0, 1});
  THD_EXPECT_THROW_MSG(where(c.to(kInt32), Tensor::ones({3}), Tensor::zeros({3})), TypeError,
                       "condition must be a bool tensor");
  THD_EXPECT_THROW_MSG(where(c, Tensor::ones({2}), Tensor::zeros({3})), ShapeError, "where");
  Tensor r = where(c, 1.5, 0);
  EXPECT_EQ(r.dtype(), kFloat32);
  EXPECT_TRUE(close(r, {1.5, 0, 1.5}));
  EXPECT_EQ(where(c, Tensor::ones({3}, kInt32), Tensor::zeros({3}, kFloat64)).dtype(), kFloat64);
}

TEST(Compare, ClampPromotionAndErrors) {
  Tensor i = test::make({3}, kInt64, {-5, 0, 5});
  Tensor f = i.clamp(-0.5, 0.5);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_TRUE(close(f, {-0.5, 0, 0.5}));
  THD_EXPECT_THROW_MSG(i.clamp_(-0.5, 0.5), TypeError, "can't be cast");
  EXPECT_TRUE(close(i, {-5, 0, 5}));
  THD_EXPECT_THROW_MSG(i.clamp(std::nullopt, std::nullopt), ValueError, "at least one");
}

}  // namespace
}  // namespace thd
