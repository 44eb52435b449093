// CUDA reductions at the edges, against the CPU: 0-dim, empty and one-element inputs,
// NaN and inf, ties, integer wrap-around, var/std without degrees of freedom, and
// the errors (the same exception types as on the CPU).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <thd/tensor.h>

#include "cuda_test_util.h"

namespace thd::testing {
namespace {

using Fn = std::function<Tensor(const Tensor&)>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

void expect_same(const Tensor& cpu_in, const Fn& f, const std::string& what, double rtol = 0,
                 double atol = 0) {
  SCOPED_TRACE(what);
  const Tensor want = f(cpu_in);
  const Tensor got = f(cpu_in.cuda());
  expect_matches_cpu(got, want, rtol, atol);
}

// Every reduction of t (all dims, and over `dims` with and without keepdim) that
// the CPU accepts, on both devices. Floating results within float tolerance.
void expect_all_ops_same(const Tensor& t, const Dims& dims, const std::string& what) {
  const DType dt = t.dtype();
  const bool fp = is_floating_point(dt);
  const auto [rtol, atol] = tolerance_for(dt);
  std::vector<std::pair<std::string, Fn>> ops = {
      {"sum", [](const Tensor& x) { return x.sum(); }},
      {"sum dims", [&](const Tensor& x) { return x.sum(dims); }},
      {"sum dims keepdim", [&](const Tensor& x) { return x.sum(dims, true); }},
      {"prod", [](const Tensor& x) { return x.prod(); }},
      {"prod dims", [&](const Tensor& x) { return x.prod(dims, true); }},
      {"any", [](const Tensor& x) { return x.any(); }},
      {"all dims", [&](const Tensor& x) { return x.all(dims); }},
  };
  if (t.numel() > 0) {
    ops.push_back({"max", [](const Tensor& x) { return x.max(); }});
    ops.push_back({"min", [](const Tensor& x) { return x.min(); }});
    if (dt != kBool) {
      ops.push_back({"argmax", [](const Tensor& x) { return x.argmax(); }});
      ops.push_back({"argmin", [](const Tensor& x) { return x.argmin(); }});
    }
  }
  if (fp) {
    ops.push_back({"mean", [](const Tensor& x) { return x.mean(); }});
    ops.push_back({"mean dims", [&](const Tensor& x) { return x.mean(dims); }});
    ops.push_back({"var", [](const Tensor& x) { return x.var(); }});
    ops.push_back({"std dims c0", [&](const Tensor& x) { return x.std(dims, 0, true); }});
    ops.push_back({"norm", [](const Tensor& x) { return x.norm(); }});
    ops.push_back({"norm 1 dims", [&](const Tensor& x) { return x.norm(1, dims); }});
    ops.push_back({"norm 0 dims", [&](const Tensor& x) { return x.norm(0, dims); }});
  }
  for (const auto& [name, f] : ops) {
    expect_same(t, f, what + " " + name, fp ? rtol : 0, fp ? atol : 0);
  }
}

TEST(CudaReduceEdge, ZeroDimOneElementAndEmpty) {
  THD_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kFloat16, kInt64, kBool, kFloat64}) {
    const std::string d(dtype_name(dt));
    expect_all_ops_same(random_cpu({}, dt), {0}, "0-dim " + d);
    expect_all_ops_same(random_cpu({}, dt), {-1}, "0-dim dim -1 " + d);
    expect_all_ops_same(random_cpu({1}, dt), {0}, "[1] " + d);
    expect_all_ops_same(random_cpu({1, 1, 1}, dt), {0, 2}, "[1,1,1] " + d);
    expect_all_ops_same(random_cpu({0, 3}, dt), {0}, "[0,3] dims 0 " + d);
    expect_all_ops_same(random_cpu({0, 3}, dt), {1}, "[0,3] dims 1 " + d);
    expect_all_ops_same(random_cpu({4, 0, 2}, dt), {0, 2}, "[4,0,2] " + d);
    expect_all_ops_same(random_cpu({5, 1, 3}, dt), {1}, "[5,1,3] size-1 dim " + d);
  }
  // Reducing the non-empty dim of an empty tensor is fine for every op.
  const Tensor e = Tensor::empty({0, 3}).cuda();
  EXPECT_EQ(e.max({1}).shape(), (Shape{0}));
  EXPECT_EQ(e.argmax(1, true).shape(), (Shape{0, 1}));
  EXPECT_EQ(e.var(Dims{1}).shape(), (Shape{0}));
  EXPECT_TRUE(e.max({1}).device().is_cuda());
}

TEST(CudaReduceEdge, NaNAndInf) {
  THD_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    // NaNs in the middle of a vector, in a short tail, and a whole column of them.
    std::vector<double> v(4000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 37) - 18;
    v[1500] = kNaN;
    v[1998] = kNaN;
    v[3001] = kInf;
    v[3002] = -kInf;
    for (size_t r = 0; r < 40; ++r) v[r * 100 + 7] = kNaN;
    const Tensor t = Tensor::from_vector<double>(v).to(dt);
    const std::string d(dtype_name(dt));
    for (const Tensor& x : {t, t.view({40, 100}), t.view({40, 100}).t(), t.slice(0, 1499, 2000)}) {
      const Dims last{-1}, first{0};
      expect_same(x, [](const Tensor& y) { return y.max(); }, "max " + d);
      expect_same(x, [](const Tensor& y) { return y.min(); }, "min " + d);
      expect_same(x, [](const Tensor& y) { return y.sum(); }, "sum " + d);
      expect_same(x, [](const Tensor& y) { return y.argmax(); }, "argmax " + d);
      expect_same(x, [](const Tensor& y) { return y.argmin(); }, "argmin " + d);
      expect_same(x, [](const Tensor& y) { return y.norm(kInf); }, "inf norm " + d);
      expect_same(x, [](const Tensor& y) { return y.norm(0); }, "0 norm " + d);
      expect_same(x, [&](const Tensor& y) { return y.max(last); }, "max(-1) " + d);
      expect_same(x, [&](const Tensor& y) { return y.min(first); }, "min(0) " + d);
      expect_same(x, [](const Tensor& y) { return y.argmax(-1); }, "argmax(-1) " + d);
      expect_same(x, [](const Tensor& y) { return y.argmin(0); }, "argmin(0) " + d);
      expect_same(x, [&](const Tensor& y) { return y.any(last); }, "any(-1) " + d);
      expect_same(x, [&](const Tensor& y) { return y.all(first); }, "all(0) " + d);
    }
    // inf without NaN: found as the extreme, not mistaken for NaN.
    std::vector<double> w(4096, 1.0);
    w[100] = kInf;
    w[3000] = -kInf;
    const Tensor u = Tensor::from_vector<double>(w).to(dt);
    expect_same(u, [](const Tensor& y) { return y.max(); }, "max inf " + d);
    expect_same(u, [](const Tensor& y) { return y.argmin(); }, "argmin -inf " + d);
    expect_same(u, [](const Tensor& y) { return y.norm(-kInf); }, "-inf norm " + d);
    expect_same(u, [](const Tensor& y) { return y.sum(); }, "sum inf - inf " + d);
  }
}

TEST(CudaReduceEdge, ArgTiesGiveTheFirstIndex) {
  THD_REQUIRE_CUDA();
  // Every value equal: the first position along the dim (and flat) wins everywhere,
  // whichever thread or block saw which element.
  for (DType dt : {kFloat32, kInt8, kInt64, kFloat16}) {
    const Tensor t = Tensor::full({300, 7000}, 3, dt);
    EXPECT_EQ(t.cuda().argmax().item<int64_t>(), 0);
    EXPECT_EQ(t.cuda().argmin().item<int64_t>(), 0);
    expect_same(t, [](const Tensor& x) { return x.argmax(0); }, "ties argmax(0)");
    expect_same(t, [](const Tensor& x) { return x.argmin(1); }, "ties argmin(1)");
    // Two maxima far apart, in different blocks of a split launch.
    Tensor m = t.clone();
    m.view({-1}).narrow(0, 1999999, 1).fill_(5);
    m.view({-1}).narrow(0, 17, 1).fill_(5);
    EXPECT_EQ(m.cuda().argmax().item<int64_t>(), 17);
    expect_same(m, [](const Tensor& x) { return x.argmax(1); }, "two maxima argmax(1)");
  }
}

TEST(CudaReduceEdge, IntegerSumsAccumulateInInt64AndWrap) {
  THD_REQUIRE_CUDA();
  const Tensor c = Tensor::full({1000}, 127, kInt8).cuda();
  EXPECT_EQ(c.sum().dtype(), kInt64);
  EXPECT_EQ(c.sum().item<int64_t>(), 127000);
  EXPECT_EQ(Tensor::full({300}, 255, kUInt8).cuda().sum().item<int64_t>(), 76500);
  EXPECT_EQ(Tensor::full({40}, 2, kInt32).cuda().prod().item<int64_t>(), int64_t{1} << 40);
  EXPECT_EQ(Tensor::full({70}, 2, kInt64).cuda().prod().item<int64_t>(), 0);  // 2^70 wraps
  const Tensor big = Tensor::from_vector<int64_t>({std::numeric_limits<int64_t>::max(), 1}).cuda();
  EXPECT_EQ(big.sum().item<int64_t>(), std::numeric_limits<int64_t>::min());
  const Tensor b = Tensor::from_vector<int64_t>({1, 0, 1, 1, 0}).to(kBool).cuda();
  EXPECT_EQ(b.sum().dtype(), kInt64);
  EXPECT_EQ(b.sum().item<int64_t>(), 3);
  EXPECT_EQ(b.prod().dtype(), kInt64);
  EXPECT_EQ(b.max().dtype(), kBool);
  const Tensor ext =
      Tensor::from_vector<int64_t>({std::numeric_limits<int64_t>::min(), -5, 3}).cuda();
  EXPECT_EQ(ext.min().item<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ext.max().item<int64_t>(), 3);
  EXPECT_EQ(ext.argmin().item<int64_t>(), 0);
}

TEST(CudaReduceEdge, VarianceCorrections) {
  THD_REQUIRE_CUDA();
  // The divisor is max(0, N - correction): 0 / 0 = nan, m2 / 0 = inf, as on the CPU.
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const auto [rtol, atol] = tolerance_for(dt);
    for (const Shape& shape : {Shape{1}, Shape{2}, Shape{3, 2}, Shape{2, 5}, Shape{}}) {
      const Tensor t = random_cpu(shape, dt);
      for (int64_t correction : {0, 1, 2, 5}) {
        const std::string what = shape_str(shape) + " correction " + std::to_string(correction);
        expect_same(t, [&](const Tensor& x) { return x.var(Dims{}, correction); }, "var " + what,
                    rtol, atol);
        expect_same(t, [&](const Tensor& x) { return x.std(Dims{-1}, correction, true); },
                    "std " + what, rtol, atol);
      }
    }
    // Constant values: no deviation at all.
    expect_same(Tensor::full({5, 9}, 2.5, dt), [](const Tensor& x) { return x.var(Dims{1}, 9); },
                "constant var correction 9", rtol, atol);
  }
  // Far from zero, where a one-pass sum of squares would cancel.
  const Tensor off = Tensor::from_vector<double>({1e9 + 1, 1e9 + 2, 1e9 + 3, 1e9 + 4});
  EXPECT_DOUBLE_EQ(off.cuda().var().item<double>(), 5.0 / 3.0);
  const Tensor offf = Tensor::from_vector<float>({10000.5f, 10001.5f, 10002.5f});
  EXPECT_NEAR(offf.cuda().var().item<double>(), 1.0, 1e-6);
}

TEST(CudaReduceEdge, InputIsNotModified) {
  THD_REQUIRE_CUDA();
  const Tensor cpu = random_cpu({33, 65}, kFloat32);
  const Tensor t = cpu.cuda();
  (void)t.sum({0});
  (void)t.var({1});
  (void)t.argmax(0);
  (void)t.t().max({1});
  (void)t.softmax(0);
  expect_matches_cpu(t, cpu, 0, 0);
}

TEST(CudaReduceEdge, ErrorsAsOnTheCpu) {
  THD_REQUIRE_CUDA();
  const Tensor i = Tensor::zeros({2, 3}, kInt64).cuda();
  EXPECT_THROW(i.mean(), TypeError);
  EXPECT_THROW(i.mean({0}), TypeError);
  EXPECT_THROW(i.var(), TypeError);
  EXPECT_THROW(i.norm(), TypeError);
  EXPECT_THROW(Tensor::zeros({2}, kBool).cuda().std(Dims{0}), TypeError);
  EXPECT_THROW(Tensor::zeros({2}, kBool).cuda().argmax(), TypeError);
  EXPECT_THROW(i.softmax(0), TypeError);
  const Tensor f = Tensor::zeros({2, 3}).cuda();
  EXPECT_THROW(f.sum({2}), IndexError);
  EXPECT_THROW(f.max({-3}), IndexError);
  EXPECT_THROW(f.sum({0, -2}), IndexError);
  EXPECT_THROW(f.argmax(2), IndexError);
  EXPECT_THROW(f.softmax(2), IndexError);
  const Tensor e = Tensor::empty({0, 3}).cuda();
  EXPECT_THROW(e.max(), ValueError);
  EXPECT_THROW(e.min({0}), IndexError);
  EXPECT_THROW(e.argmax(), ValueError);
  EXPECT_THROW(e.argmin(0), IndexError);
  EXPECT_THROW(e.norm(kInf), ValueError);
  EXPECT_THROW(e.norm(-kInf, {0}), IndexError);
  // The same types as the CPU raises for the same calls.
  EXPECT_THROW(Tensor::empty({0, 3}).max(), ValueError);
  EXPECT_THROW(Tensor::empty({0, 3}).min({0}), IndexError);
}

}  // namespace
}  // namespace thd::testing
