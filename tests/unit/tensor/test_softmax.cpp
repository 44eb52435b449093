// softmax / log_softmax against a reference computed here in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <thd/tensor.h>

#include "tensor/reference.h"

namespace thd {
namespace {

using test::values;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Row-major values of softmax (or log_softmax) of t along dim, from t's raw elements.
std::vector<double> ref_softmax(const Tensor& t, int64_t dim, bool log) {
  const std::vector<double> v = values(t);
  if (t.dim() == 0) return {log ? v[0] - v[0] : std::exp(v[0] - v[0])};
  const int64_t d = dim < 0 ? dim + t.dim() : dim;
  int64_t outer = 1, n = t.shape()[d], inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= t.shape()[i];
  for (int64_t i = d + 1; i < t.dim(); ++i) inner *= t.shape()[i];
  std::vector<double> out(v.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * n + k) * inner + i); };
      double m = -kInf;
      bool nan = false;
      for (int64_t k = 0; k < n; ++k) {
        nan = nan || std::isnan(v[at(k)]);
        m = std::max(m, v[at(k)]);
      }
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += std::exp(v[at(k)] - m);
      for (int64_t k = 0; k < n; ++k) {
        const double r = log ? v[at(k)] - m - std::log(s) : std::exp(v[at(k)] - m) / s;
        out[at(k)] = nan ? kNaN : r;
      }
    }
  }
  return out;
}

::testing::AssertionResult softmax_ok(const Tensor& t, int64_t dim, bool log, double rtol = -1) {
  const Tensor got = log ? t.log_softmax(dim) : t.softmax(dim);
  if (got.dtype() != t.dtype()) {
    return ::testing::AssertionFailure() << "dtype " << got.dtype() << " != " << t.dtype();
  }
  if (got.shape() != t.shape()) {
    return ::testing::AssertionFailure() << "shape " << shape_str(got.shape());
  }
  std::vector<double> want = ref_softmax(t, dim, log);
  for (double& w : want) w = test::round_to(t.dtype(), w);
  // 16-bit results are rounded from float32 arithmetic: a few units of their precision.
  if (rtol < 0) rtol = test::tolerance(t.dtype()) * 4;
  return test::close(got, want, rtol);
}

TEST(Softmax, EveryFloatDtypeAndDim) {
  for (DType dt : test::float_dtypes()) {
    Tensor t = test::sample_tensor({3, 4, 5}, dt, 3);
    for (int64_t d : {0, 1, 2, -1, -2, -3}) {
      EXPECT_TRUE(softmax_ok(t, d, false)) << dt << " dim " << d;
      EXPECT_TRUE(softmax_ok(t, d, true)) << dt << " dim " << d;
    }
  }
}

TEST(Softmax, SumsToOne) {
  Tensor t = test::sample_tensor({6, 9}, kFloat64, 5);
  const std::vector<double> p = values(t.softmax(1));
  for (int r = 0; r < 6; ++r) {
    double s = 0;
    for (int k = 0; k < 9; ++k) s += p[r * 9 + k];
    EXPECT_NEAR(s, 1.0, 1e-12);
  }
  const std::vector<double> l = values(t.log_softmax(0));
  for (int c = 0; c < 9; ++c) {
    double s = 0;
    for (int r = 0; r < 6; ++r) s += std::exp(l[r * 9 + c]);
    EXPECT_NEAR(s, 1.0, 1e-12);
  }
}

TEST(Softmax, NonContiguousInputs) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    Tensor base = test::sample_tensor({4, 6, 5}, dt, 7);
    const std::vector<std::pair<std::string, Tensor>> cases = {
        {"permuted", base.permute({2, 0, 1})},
        {"transposed", base.transpose(1, 2)},
        {"step-sliced", base.slice(1, 0, 6, 2).slice(2, 1, 5, 2)},
        {"expanded", test::sample_tensor({4, 1, 5}, dt, 9).expand({4, 3, 5})},
    };
    for (const auto& [name, t] : cases) {
      for (int64_t d = 0; d < t.dim(); ++d) {
        EXPECT_TRUE(softmax_ok(t, d, false)) << name << " " << dt << " dim " << d;
        EXPECT_TRUE(softmax_ok(t, d, true)) << name << " " << dt << " dim " << d;
      }
    }
  }
}

TEST(Softmax, NumericallyStable) {
  // exp(1000) overflows float64; subtracting the max keeps it finite.
  Tensor big = Tensor::from_vector<float>({1000.f, 1001.f, 1002.f});
  EXPECT_TRUE(softmax_ok(big, 0, false));
  Tensor big64 = Tensor::from_vector<double>({1000.0, 1001.0, 1002.0});
  EXPECT_TRUE(softmax_ok(big64, 0, true));
  // log_softmax keeps tiny probabilities that softmax rounds to 0 (log(0) = -inf).
  Tensor far = Tensor::from_vector<float>({0.f, -1000.f});
  EXPECT_TRUE(test::close(far.log_softmax(0), {0.0, -1000.0}));
  EXPECT_TRUE(test::close(far.softmax(0), {1.0, 0.0}));
  Tensor half = test::make({3}, kFloat16, {60000, 60000, -60000});
  EXPECT_TRUE(test::close(half.softmax(0), {0.5, 0.5, 0.0}));
}

TEST(Softmax, InfAndNaN) {
  Tensor t = test::make({3, 3}, kFloat32, {-kInf, 0, 0, 1, kNaN, 2, -kInf, -kInf, -kInf});
  // Row 0: -inf gets probability 0. Row 1: NaN poisons its row only. Row 2: all -inf is
  // nan (torch: exp(-inf - -inf)).
  EXPECT_TRUE(test::close(t.softmax(1), {0, 0.5, 0.5, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN}));
  EXPECT_TRUE(softmax_ok(t, 0, false));
  EXPECT_TRUE(softmax_ok(t, 1, true));
  std::vector<double> lv = values(t.log_softmax(1));
  EXPECT_EQ(lv[0], -kInf);
  EXPECT_NEAR(lv[1], -std::log(2.0), 1e-6);
}

TEST(Softmax, ZeroDimAndEmpty) {
  Tensor s = Tensor::full({}, 3.5, kFloat32);
  EXPECT_EQ(s.softmax(0).dim(), 0);
  EXPECT_EQ(s.softmax(0).item<double>(), 1.0);
  EXPECT_EQ(s.log_softmax(-1).item<double>(), 0.0);
  THD_EXPECT_THROW_MSG(s.softmax(1), IndexError, "out of range");

  Tensor e = Tensor::empty({0, 4}, kFloat32);
  EXPECT_EQ(e.softmax(1).shape(), (Shape{0, 4}));
  EXPECT_EQ(e.log_softmax(0).shape(), (Shape{0, 4}));
  Tensor e2 = Tensor::empty({3, 0}, kFloat64);
  EXPECT_EQ(e2.softmax(1).shape(), (Shape{3, 0}));
  Tensor one = test::make({4, 1}, kFloat32, {1, 2, 3, 4});
  EXPECT_TRUE(test::close(one.softmax(1), {1, 1, 1, 1}));
}

TEST(Softmax, InputIsNotModified) {
  Tensor t = test::sample_tensor({5, 7}, kFloat32, 11);
  const std::vector<double> before = values(t);
  Tensor out = t.softmax(0);
  EXPECT_FALSE(out.shares_storage(t));
  t.log_softmax(1);
  EXPECT_EQ(values(t), before);
}

TEST(Softmax, LargeParallel) {
  std::mt19937 rng(13);
  std::normal_distribution<double> nd(0, 3);
  auto randn = [&](const Shape& shape, DType dt) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) x = nd(rng);
    return test::make(shape, dt, v);
  };
  // Long rows, many short rows, and a non-last dim whose inner size is not a multiple
  // of the column tile.
  Tensor rows = randn({4, 300000}, kFloat32);
  EXPECT_TRUE(softmax_ok(rows, 1, false, 1e-5));
  EXPECT_TRUE(softmax_ok(rows, 1, true, 1e-5));
  Tensor many = randn({100000, 7}, kFloat32);
  EXPECT_TRUE(softmax_ok(many, -1, false, 1e-5));
  Tensor cols = randn({3, 500, 700}, kFloat32);
  EXPECT_TRUE(softmax_ok(cols, 1, false, 1e-5));
  EXPECT_TRUE(softmax_ok(cols, 0, true, 1e-5));
  Tensor h = randn({1000, 300}, kFloat16);
  EXPECT_TRUE(softmax_ok(h, 0, false));
  EXPECT_TRUE(softmax_ok(h.t(), 1, true));
}

TEST(Softmax, Errors) {
  THD_EXPECT_THROW_MSG(Tensor::zeros({2, 3}, kInt64).softmax(1), TypeError,
                       "softmax: dtype int64 is not supported");
  THD_EXPECT_THROW_MSG(Tensor::zeros({2}, kBool).log_softmax(0), TypeError, "log_softmax");
  Tensor f = Tensor::zeros({2, 3}, kFloat32);
  THD_EXPECT_THROW_MSG(f.softmax(2), IndexError, "dim 2 is out of range");
  THD_EXPECT_THROW_MSG(f.log_softmax(-3), IndexError, "log_softmax");
  THD_EXPECT_THROW_MSG(Tensor().softmax(0), ValueError, "softmax");
}

}  // namespace
}  // namespace thd
