#include <gtest/gtest.h>

#include <cmath>

#include <thd/tensor.h>

#include "tensor/parallel.h"
#include "tensor/reference.h"

namespace thd {
namespace {

using test::values;

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double var_of(const std::vector<double>& v) {
  double m = mean_of(v), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

TEST(Random, SameSeedSameValues) {
  Generator g1(42), g2(42), g3(43);
  Tensor a = Tensor::rand({1000}, kFloat32, &g1);
  Tensor b = Tensor::rand({1000}, kFloat32, &g2);
  Tensor c = Tensor::rand({1000}, kFloat32, &g3);
  EXPECT_EQ(values(a), values(b));
  EXPECT_NE(values(a), values(c));
  // The generator advances: a second draw differs from the first.
  EXPECT_NE(values(Tensor::rand({1000}, kFloat32, &g1)), values(a));
  manual_seed(7);
  Tensor d = Tensor::randn({100});
  manual_seed(7);
  EXPECT_EQ(values(Tensor::randn({100})), values(d));
}

TEST(Random, IndependentOfThreadCount) {
  const int before = detail::num_threads();
  Generator g1(5), g2(5);
  detail::set_num_threads(1);
  Tensor one = Tensor::randn({300000}, kFloat64, &g1);
  detail::set_num_threads(4);
  Tensor four = Tensor::randn({300000}, kFloat64, &g2);
  detail::set_num_threads(before);
  EXPECT_EQ(values(one), values(four));
}

TEST(Random, UniformMoments) {
  for (DType dt : test::float_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    Generator g(1);
    std::vector<double> v = values(Tensor::rand({200000}, dt, &g));
    for (double x : v) ASSERT_TRUE(x >= 0 && x < 1) << x;
    EXPECT_NEAR(mean_of(v), 0.5, 0.01);
    EXPECT_NEAR(var_of(v), 1.0 / 12, 0.01);
  }
}

TEST(Random, NormalMoments) {
  for (DType dt : test::float_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    Generator g(2);
    std::vector<double> v = values(Tensor::randn({200000}, dt, &g));
    EXPECT_NEAR(mean_of(v), 0.0, 0.01);
    EXPECT_NEAR(var_of(v), 1.0, 0.02);
    int64_t beyond = 0;
    for (double x : v) beyond += std::abs(x) > 3 ? 1 : 0;
    EXPECT_NEAR(static_cast<double>(beyond) / v.size(), 0.0027, 0.001);  // P(|z| > 3)
  }
}

TEST(Random, RandintRangeAndCoverage) {
  for (DType dt : {kInt64, kInt32, kInt8, kUInt8, kFloat32}) {
    SCOPED_TRACE(dtype_name(dt));
    Generator g(3);
    std::vector<double> v = values(Tensor::randint(-3, 4, {70000}, dt == kUInt8 ? kInt64 : dt, &g));
    std::vector<int> hist(7, 0);
    for (double x : v) {
      ASSERT_TRUE(x >= -3 && x < 4) << x;
      ++hist[static_cast<int>(x) + 3];
    }
    for (int h : hist) EXPECT_NEAR(h, 10000, 500);
  }
  Generator g(4);
  std::vector<double> b = values(Tensor::randint(0, 2, {1000}, kBool, &g));
  EXPECT_NEAR(mean_of(b), 0.5, 0.06);
  THD_EXPECT_THROW_MSG(Tensor::randint(5, 5, {2}), ValueError, "less than 'high'");
  THD_EXPECT_THROW_MSG(Tensor::randint(0, 300, {2}, kUInt8), ValueError, "does not fit in dtype uint8");
  THD_EXPECT_THROW_MSG(Tensor::randint(-1, 3, {2}, kUInt8), ValueError, "does not fit");
}

TEST(Random, RejectsNonFloatingDTypes) {
  THD_EXPECT_THROW_MSG(Tensor::rand({2}, kInt32), TypeError, "rand: dtype int32 is not supported");
  THD_EXPECT_THROW_MSG(Tensor::randn({2}, kBool), TypeError, "randn");
  EXPECT_EQ(Tensor::rand({0, 3}).numel(), 0);
}

}  // namespace
}  // namespace thd
