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

struct MathCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<Tensor&(Tensor&)> op_;
  std::function<double(double)> ref;
  bool positive_only;
};

const std::vector<MathCase>& math_cases() {
  static const std::vector<MathCase> cases = {
      {"exp", [](const Tensor& t) { return t.exp(); }, [](Tensor& t) -> Tensor& { return t.exp_(); },
       [](double x) { return std::exp(x); }, false},
      {"log", [](const Tensor& t) { return t.log(); }, [](Tensor& t) -> Tensor& { return t.log_(); },
       [](double x) { return std::log(x); }, true},
      {"sqrt", [](const Tensor& t) { return t.sqrt(); }, [](Tensor& t) -> Tensor& { return t.sqrt_(); },
       [](double x) { return std::sqrt(x); }, true},
      {"rsqrt", [](const Tensor& t) { return t.rsqrt(); }, [](Tensor& t) -> Tensor& { return t.rsqrt_(); },
       [](double x) { return 1 / std::sqrt(x); }, true},
      {"sin", [](const Tensor& t) { return t.sin(); }, [](Tensor& t) -> Tensor& { return t.sin_(); },
       [](double x) { return std::sin(x); }, false},
      {"cos", [](const Tensor& t) { return t.cos(); }, [](Tensor& t) -> Tensor& { return t.cos_(); },
       [](double x) { return std::cos(x); }, false},
      {"tanh", [](const Tensor& t) { return t.tanh(); }, [](Tensor& t) -> Tensor& { return t.tanh_(); },
       [](double x) { return std::tanh(x); }, false},
      {"sigmoid", [](const Tensor& t) { return t.sigmoid(); },
       [](Tensor& t) -> Tensor& { return t.sigmoid_(); }, [](double x) { return 1 / (1 + std::exp(-x)); },
       false},
      {"gelu", [](const Tensor& t) { return t.gelu(); }, [](Tensor& t) -> Tensor& { return t.gelu_(); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, false},
  };
  return cases;
}

std::vector<double> map(const std::vector<double>& v, const std::function<double(double)>& f) {
  std::vector<double> out;
  for (double x : v) out.push_back(f(x));
  return out;
}

class UnaryByDType : public ::testing::TestWithParam<DType> {};

TEST_P(UnaryByDType, MathFunctions) {
  DType dt = GetParam();
  for (const MathCase& c : math_cases()) {
    SCOPED_TRACE(c.name);
    Tensor x = test::sample_tensor({3, 5}, dt, 21, c.positive_only);
    if (dt != kBool && !c.positive_only) x = x.to(dt);
    Tensor y = c.op(x);
    DType want = is_floating_point(dt) ? dt : kFloat32;
    EXPECT_EQ(y.dtype(), want);
    EXPECT_EQ(y.shape(), x.shape());
    // The input as the op sees it (rounded to its dtype), the result rounded to `want`.
    std::vector<double> ref = map(values(x), c.ref);
    for (auto& r : ref) r = test::round_to(want, r);
    double tol = is_floating_point(dt) ? 2 * test::tolerance(want) : 1e-6;
    EXPECT_TRUE(close(y, ref, tol, tol));
    if (is_floating_point(dt)) {
      Tensor z = x.clone();
      c.op_(z);
      EXPECT_TRUE(close(z, ref, tol, tol));
    } else {
      Tensor z = x.clone();
      THD_EXPECT_THROW_MSG(c.op_(z), TypeError, "can't be cast to the desired output type");
      EXPECT_EQ(values(z), values(x));
    }
  }
}

TEST_P(UnaryByDType, NegAbsRelu) {
  DType dt = GetParam();
  Tensor x = test::sample_tensor({4, 6}, dt, 22);
  if (dt == kBool) {
    THD_EXPECT_THROW_MSG(x.neg(), TypeError, "logical_not");
    THD_EXPECT_THROW_MSG(x.abs(), TypeError, "bool");
    THD_EXPECT_THROW_MSG(x.relu(), TypeError, "bool");
    return;
  }
  std::vector<double> v = values(x);
  if (dt != kUInt8) {
    EXPECT_TRUE(close(x.neg(), map(v, [](double a) { return -a; })));
    EXPECT_TRUE(close(-x, map(v, [](double a) { return -a; })));
  }
  EXPECT_TRUE(close(x.abs(), map(v, [](double a) { return std::abs(a); })));
  EXPECT_TRUE(close(x.relu(), map(v, [](double a) { return a > 0 ? a : 0; })));
  Tensor y = x.clone();
  y.relu_();
  EXPECT_EQ(y.dtype(), dt);
  EXPECT_TRUE(close(y, map(v, [](double a) { return a > 0 ? a : 0; })));
  y.abs_();
  EXPECT_TRUE(close(y, map(v, [](double a) { return a > 0 ? a : 0; })));
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, UnaryByDType, ::testing::ValuesIn(test::all_dtypes()),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Unary, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x = test::make({5}, kFloat32, {0, -1, inf, -inf, std::nan("")});
  std::vector<double> l = values(x.log());
  EXPECT_EQ(l[0], -inf);
  EXPECT_TRUE(std::isnan(l[1]));
  EXPECT_EQ(l[2], inf);
  std::vector<double> s = values(x.sigmoid());
  EXPECT_EQ(s[2], 1.0);
  EXPECT_EQ(s[3], 0.0);
  EXPECT_TRUE(std::isnan(values(x.relu())[4]));
  EXPECT_EQ(values(x.rsqrt())[0], inf);
  EXPECT_EQ(values(test::make({1}, kInt32, {std::numeric_limits<int32_t>::min()}).abs())[0],
            std::numeric_limits<int32_t>::min());  // wraps, as torch
}

TEST(Unary, NonContiguousAndEmpty) {
  Tensor base = test::sample_tensor({5, 6}, kFloat64, 23);
  Tensor v = base.t().slice(0, 0, 6, 2);
  EXPECT_TRUE(close(v.exp(), map(values(v), [](double a) { return std::exp(a); })));
  std::vector<double> before = values(base);
  v.neg_();
  std::vector<double> after = values(base);
  for (int64_t r = 0; r < 5; ++r) {
    for (int64_t c = 0; c < 6; ++c) {
      double want = c % 2 == 0 ? -before[r * 6 + c] : before[r * 6 + c];
      EXPECT_EQ(after[r * 6 + c], want);
    }
  }
  EXPECT_EQ(Tensor::empty({0, 4}).exp().shape(), (Shape{0, 4}));
  EXPECT_EQ(Tensor::full({}, 4.0f).sqrt().item<float>(), 2.0f);
  THD_EXPECT_THROW_MSG(Tensor().exp(), ValueError, "undefined");
}

TEST(Unary, LargeTensorMatchesReference) {
  const int64_t n = 300001;
  Tensor x = Tensor::linspace(-5, 5, n, kFloat32);
  std::vector<double> v = values(x), t = values(x.tanh());
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(t[i], std::tanh(v[i]), 1e-6) << i;
}

}  // namespace
}  // namespace thd
