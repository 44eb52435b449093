// Reductions against references computed here in double precision from the raw
// elements (test::values), for every dtype, layout and dim combination.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <thd/tensor.h>

#include "tensor/reference.h"

namespace thd {
namespace {

using test::values;
using Group = std::vector<double>;
using Fn = std::function<double(const Group&)>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The reduction spelled out: the elements of every output, in row-major order of the
// reduced dims, and the shape the result must have.
struct Grouped {
  Shape shape;
  std::vector<Group> groups;
};

Grouped group(const Tensor& t, const Dims& dims, bool keepdim) {
  const int64_t nd = t.dim();
  std::vector<bool> mask(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) {
    if (nd > 0) mask[d < 0 ? d + nd : d] = true;
  }
  Grouped g;
  int64_t n_out = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (!mask[d]) {
      n_out *= t.shape()[d];
      g.shape.push_back(t.shape()[d]);
    } else if (keepdim) {
      g.shape.push_back(1);
    }
  }
  g.groups.resize(static_cast<size_t>(n_out));
  const std::vector<double> v = values(t);
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t o = 0;
    for (int64_t d = 0; d < nd; ++d) {
      if (!mask[d]) o = o * t.shape()[d] + idx[d];
    }
    g.groups[o].push_back(v[i]);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[d] < t.shape()[d]) break;
      idx[d] = 0;
    }
  }
  return g;
}

std::vector<double> apply(const Grouped& g, const Fn& f, DType round_dtype) {
  std::vector<double> out;
  for (const Group& x : g.groups) out.push_back(test::round_to(round_dtype, f(x)));
  return out;
}

// ---- references -------------------------------------------------------------------

double ref_sum(const Group& x) {
  double s = 0;
  for (double v : x) s += v;
  return s;
}
double ref_prod(const Group& x) {
  double s = 1;
  for (double v : x) s *= v;
  return s;
}
double ref_mean(const Group& x) { return ref_sum(x) / static_cast<double>(x.size()); }
double ref_max(const Group& x) {
  double m = -kInf;
  for (double v : x) {
    if (std::isnan(v)) return kNaN;
    m = std::max(m, v);
  }
  return m;
}
double ref_min(const Group& x) {
  double m = kInf;
  for (double v : x) {
    if (std::isnan(v)) return kNaN;
    m = std::min(m, v);
  }
  return m;
}
double ref_argmax(const Group& x) {
  size_t best = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) return static_cast<double>(i);
    if (x[i] > x[best]) best = i;
  }
  return static_cast<double>(best);
}
double ref_argmin(const Group& x) {
  size_t best = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) return static_cast<double>(i);
    if (x[i] < x[best]) best = i;
  }
  return static_cast<double>(best);
}
double ref_any(const Group& x) {
  for (double v : x) {
    if (v != 0) return 1;
  }
  return 0;
}
double ref_all(const Group& x) {
  for (double v : x) {
    if (v == 0) return 0;
  }
  return 1;
}
Fn ref_var(int64_t correction, bool take_sqrt) {
  return [=](const Group& x) {
    const double n = static_cast<double>(x.size());
    const double m = ref_mean(x);
    double m2 = 0;
    for (double v : x) m2 += (v - m) * (v - m);
    const double var = m2 / std::max(0.0, n - static_cast<double>(correction));
    return take_sqrt ? std::sqrt(var) : var;
  };
}
Fn ref_norm(double p) {
  return [=](const Group& x) {
    if (std::isinf(p)) {
      Group a;
      for (double v : x) a.push_back(std::abs(v));
      return p > 0 ? ref_max(a) : ref_min(a);
    }
    double s = 0;
    for (double v : x) s += p == 0 ? (v != 0 ? 1.0 : 0.0) : std::pow(std::abs(v), p);
    return p == 0 ? s : std::pow(s, 1.0 / p);
  };
}

DType sum_dtype(DType d) { return is_floating_point(d) ? d : kInt64; }

// Checks shape, dtype and values of got against f applied to each group of g.
::testing::AssertionResult matches(const Tensor& got, const Grouped& g, const Fn& f,
                                   DType want_dtype, double rtol = -1) {
  if (got.dtype() != want_dtype) {
    return ::testing::AssertionFailure() << "dtype " << got.dtype() << " != " << want_dtype;
  }
  if (got.shape() != g.shape) {
    return ::testing::AssertionFailure() << "shape " << shape_str(got.shape()) << " != "
                                         << shape_str(g.shape);
  }
  return test::close(got, apply(g, f, want_dtype), rtol);
}

// The same, grouping `in` over (dims, keepdim).
::testing::AssertionResult matches(const Tensor& got, const Tensor& in, const Dims& dims,
                                   bool keepdim, const Fn& f, DType want_dtype,
                                   double rtol = -1) {
  return matches(got, group(in, dims, keepdim), f, want_dtype, rtol);
}

const std::vector<Dims>& dim_sets() {
  static const std::vector<Dims> v = {{},     {0},     {1},       {2},      {-1},
                                      {0, 2}, {-1, 1}, {0, 1, 2}, {2, 0, 1}};
  return v;
}

std::string label(DType d, const Dims& dims, bool keepdim) {
  return std::string(dtype_name(d)) + " dims " + shape_str(dims) + (keepdim ? " keepdim" : "");
}

// ---- every op, every dtype, every dim set ------------------------------------------

TEST(Reduce, SumEveryDtypeAndDims) {
  for (DType dt : test::all_dtypes()) {
    Tensor t = test::sample_tensor({3, 4, 5}, dt, 3);
    EXPECT_TRUE(matches(t.sum(), t, {}, false, ref_sum, sum_dtype(dt))) << dt;
    for (const Dims& dims : dim_sets()) {
      for (bool keepdim : {false, true}) {
        EXPECT_TRUE(matches(t.sum(dims, keepdim), t, dims, keepdim, ref_sum, sum_dtype(dt)))
            << label(dt, dims, keepdim);
      }
    }
  }
}

TEST(Reduce, ProdEveryDtypeAndDims) {
  std::mt19937 rng(5);
  for (DType dt : test::all_dtypes()) {
    // Factors small enough that 20 of them stay exact in every dtype's accumulator.
    std::vector<double> v(60);
    for (double& x : v) {
      if (dt == kBool) {
        x = static_cast<double>(rng() % 5 != 0);
      } else if (dt == kUInt8) {
        x = static_cast<double>(rng() % 3);
      } else if (is_floating_point(dt)) {
        x = static_cast<double>(static_cast<int>(rng() % 5) - 2) * 0.5 + (rng() % 2 ? 0.25 : 0.0);
      } else {
        x = static_cast<double>(static_cast<int>(rng() % 5) - 2);
      }
    }
    Tensor t = test::make({3, 4, 5}, dt, v);
    EXPECT_TRUE(matches(t.prod(), t, {}, false, ref_prod, sum_dtype(dt))) << dt;
    for (const Dims& dims : dim_sets()) {
      for (bool keepdim : {false, true}) {
        EXPECT_TRUE(matches(t.prod(dims, keepdim), t, dims, keepdim, ref_prod, sum_dtype(dt)))
            << label(dt, dims, keepdim);
      }
    }
  }
}

TEST(Reduce, MaxMinEveryDtypeAndDims) {
  for (DType dt : test::all_dtypes()) {
    Tensor t = test::sample_tensor({3, 4, 5}, dt, 7);
    EXPECT_TRUE(matches(t.max(), t, {}, false, ref_max, dt)) << dt;
    EXPECT_TRUE(matches(t.min(), t, {}, false, ref_min, dt)) << dt;
    for (const Dims& dims : dim_sets()) {
      for (bool keepdim : {false, true}) {
        EXPECT_TRUE(matches(t.max(dims, keepdim), t, dims, keepdim, ref_max, dt))
            << label(dt, dims, keepdim);
        EXPECT_TRUE(matches(t.min(dims, keepdim), t, dims, keepdim, ref_min, dt))
            << label(dt, dims, keepdim);
      }
    }
  }
}

TEST(Reduce, ArgmaxArgminEveryDtypeAndDim) {
  for (DType dt : test::numeric_dtypes()) {
    // Few distinct values: ties everywhere, so "first index" is what gets tested.
    std::vector<double> v = test::sample(60, dt, 11);
    for (double& x : v) x = std::fmod(x, 3.0);
    Tensor t = test::make({3, 4, 5}, dt, v);
    EXPECT_TRUE(matches(t.argmax(), t, {}, false, ref_argmax, kInt64)) << dt;
    EXPECT_TRUE(matches(t.argmin(), t, {}, false, ref_argmin, kInt64)) << dt;
    for (int64_t d : {0, 1, 2, -1, -3}) {
      for (bool keepdim : {false, true}) {
        EXPECT_TRUE(matches(t.argmax(d, keepdim), t, {d}, keepdim, ref_argmax, kInt64))
            << label(dt, {d}, keepdim);
        EXPECT_TRUE(matches(t.argmin(d, keepdim), t, {d}, keepdim, ref_argmin, kInt64))
            << label(dt, {d}, keepdim);
      }
    }
  }
}

TEST(Reduce, AnyAllEveryDtypeAndDims) {
  for (DType dt : test::all_dtypes()) {
    // Mostly non-zero, so that all() is sometimes true.
    std::vector<double> v = test::sample(60, dt, 13, /*positive=*/dt != kBool);
    v[7] = 0;
    v[33] = 0;
    Tensor t = test::make({3, 4, 5}, dt, v);
    EXPECT_TRUE(matches(t.any(), t, {}, false, ref_any, kBool)) << dt;
    EXPECT_TRUE(matches(t.all(), t, {}, false, ref_all, kBool)) << dt;
    for (const Dims& dims : dim_sets()) {
      for (bool keepdim : {false, true}) {
        EXPECT_TRUE(matches(t.any(dims, keepdim), t, dims, keepdim, ref_any, kBool))
            << label(dt, dims, keepdim);
        EXPECT_TRUE(matches(t.all(dims, keepdim), t, dims, keepdim, ref_all, kBool))
            << label(dt, dims, keepdim);
      }
    }
  }
  Tensor z = Tensor::zeros({4, 3}, kInt32);
  EXPECT_FALSE(z.any().item<bool>());
  EXPECT_FALSE(z.all().item<bool>());
  EXPECT_TRUE(Tensor::ones({4, 3}, kFloat16).all().item<bool>());
}

TEST(Reduce, MeanVarStdNormEveryFloatDtypeAndDims) {
  for (DType dt : test::float_dtypes()) {
    Tensor t = test::sample_tensor({3, 4, 5}, dt, 17);
    // The 16-bit results are rounded once from an exact double; allow for that.
    const double rtol = test::tolerance(dt) * 2;
    EXPECT_TRUE(matches(t.mean(), t, {}, false, ref_mean, dt, rtol)) << dt;
    EXPECT_TRUE(matches(t.var(), t, {}, false, ref_var(1, false), dt, rtol)) << dt;
    EXPECT_TRUE(matches(t.std(), t, {}, false, ref_var(1, true), dt, rtol)) << dt;
    EXPECT_TRUE(matches(t.norm(), t, {}, false, ref_norm(2), dt, rtol)) << dt;
    for (const Dims& dims : dim_sets()) {
      for (bool keepdim : {false, true}) {
        const std::string l = label(dt, dims, keepdim);
        EXPECT_TRUE(matches(t.mean(dims, keepdim), t, dims, keepdim, ref_mean, dt, rtol)) << l;
        for (int64_t c : {0, 1, 2}) {
          const Grouped g = group(t, dims, keepdim);
          EXPECT_TRUE(matches(t.var(dims, c, keepdim), g, ref_var(c, false), dt, rtol))
              << l << " correction " << c;
          EXPECT_TRUE(matches(t.std(dims, c, keepdim), g, ref_var(c, true), dt, rtol))
              << l << " correction " << c;
        }
        for (double p : {2.0, 1.0, 0.0, 3.0, 0.5, kInf, -kInf}) {
          EXPECT_TRUE(matches(t.norm(p, dims, keepdim), t, dims, keepdim, ref_norm(p), dt, rtol))
              << l << " p " << p;
        }
      }
    }
  }
}

// ---- layouts: transposed, sliced with a step, expanded ------------------------------

std::vector<std::pair<std::string, Tensor>> layouts(DType dt) {
  Tensor base = test::sample_tensor({4, 6, 5}, dt, 23);
  return {
      {"contiguous", base},
      {"permuted", base.permute({2, 0, 1})},
      {"transposed", base.transpose(0, 2)},
      {"step-sliced", base.slice(1, 1, 6, 2).slice(2, 0, 5, 3)},
      {"expanded", test::sample_tensor({4, 1, 5}, dt, 29).expand({4, 6, 5})},
      {"expanded-front", test::sample_tensor({6, 1}, dt, 31).expand({3, 6, 7})},
      {"size-1 dims", test::sample_tensor({1, 6, 1, 5}, dt, 37).select(2, 0)},
  };
}

TEST(Reduce, NonContiguousLayoutsEveryDimSubset) {
  for (DType dt : {kFloat32, kInt32, kFloat16, kBool}) {
    for (auto& [name, t] : layouts(dt)) {
      std::vector<Dims> subsets;
      for (int mask = 0; mask < (1 << t.dim()); ++mask) {
        Dims d;
        for (int64_t i = 0; i < t.dim(); ++i) {
          if (mask & (1 << i)) d.push_back(i);
        }
        subsets.push_back(d);
      }
      for (const Dims& dims : subsets) {
        for (bool keepdim : {false, true}) {
          const std::string l = name + " " + label(dt, dims, keepdim);
          EXPECT_TRUE(matches(t.sum(dims, keepdim), t, dims, keepdim, ref_sum, sum_dtype(dt))) << l;
          EXPECT_TRUE(matches(t.max(dims, keepdim), t, dims, keepdim, ref_max, dt)) << l;
          EXPECT_TRUE(matches(t.any(dims, keepdim), t, dims, keepdim, ref_any, kBool)) << l;
          if (dt == kFloat32) {
            const Grouped g = group(t, dims, keepdim);
            EXPECT_TRUE(matches(t.var(dims, 1, keepdim), g, ref_var(1, false), dt, 1e-5)) << l;
            EXPECT_TRUE(matches(t.norm(2, dims, keepdim), g, ref_norm(2), dt, 1e-5)) << l;
          }
        }
      }
      if (dt == kBool) continue;
      EXPECT_TRUE(matches(t.argmax(), t, {}, false, ref_argmax, kInt64)) << name;
      EXPECT_TRUE(matches(t.argmin(), t, {}, false, ref_argmin, kInt64)) << name;
      for (int64_t d = 0; d < t.dim(); ++d) {
        EXPECT_TRUE(matches(t.argmax(d), t, {d}, false, ref_argmax, kInt64)) << name << d;
        EXPECT_TRUE(matches(t.argmin(d, true), t, {d}, true, ref_argmin, kInt64)) << name << d;
      }
    }
  }
}

TEST(Reduce, InputIsNotModified) {
  Tensor t = test::sample_tensor({5, 7}, kFloat32, 41);
  const std::vector<double> before = values(t);
  t.sum({0});
  t.var(Dims{1});
  t.argmax(0);
  t.norm(3.0, {0, 1});
  EXPECT_EQ(values(t), before);
  EXPECT_FALSE(t.sum({0}).shares_storage(t));
}

// ---- 0-dim, empty and zero-size ---------------------------------------------------

TEST(Reduce, ZeroDimTensors) {
  Tensor s = Tensor::full({}, 2.5, kFloat32);
  for (Tensor r : {s.sum(), s.sum({0}), s.sum({-1}, true), s.max({0}), s.mean({-1}), s.prod({})}) {
    EXPECT_EQ(r.dim(), 0);
    EXPECT_EQ(r.item<double>(), 2.5);
  }
  EXPECT_EQ(s.argmax().item<int64_t>(), 0);
  EXPECT_EQ(s.argmin(0, true).item<int64_t>(), 0);
  EXPECT_EQ(s.argmax(-1).dim(), 0);
  EXPECT_TRUE(std::isnan(s.var().item<double>()));  // one element, one lost dof: 0 / 0
  EXPECT_EQ(s.var({0}, 0).item<double>(), 0.0);
  EXPECT_EQ(s.norm(1).item<double>(), 2.5);
  EXPECT_TRUE(s.any().item<bool>());
  Tensor i = Tensor::full({}, 7, kInt8);
  EXPECT_EQ(i.sum().dtype(), kInt64);
  EXPECT_EQ(i.sum().item<int64_t>(), 7);
  THD_EXPECT_THROW_MSG(s.sum({1}), IndexError, "out of range");
  THD_EXPECT_THROW_MSG(s.argmax(1), IndexError, "out of range");
  THD_EXPECT_THROW_MSG(s.sum({0, -1}), IndexError, "more than once");
}

TEST(Reduce, EmptyTensorsGiveIdentities) {
  Tensor e = Tensor::empty({0, 3}, kFloat32);
  EXPECT_EQ(e.sum().item<double>(), 0.0);
  EXPECT_EQ(e.prod().item<double>(), 1.0);
  EXPECT_FALSE(e.any().item<bool>());
  EXPECT_TRUE(e.all().item<bool>());
  EXPECT_TRUE(std::isnan(e.mean().item<double>()));
  EXPECT_TRUE(std::isnan(e.var().item<double>()));
  EXPECT_TRUE(test::close(e.std({0}, 0), {kNaN, kNaN, kNaN}));
  EXPECT_EQ(e.norm().item<double>(), 0.0);
  EXPECT_EQ(e.norm(0).item<double>(), 0.0);

  EXPECT_TRUE(test::close(e.sum({0}), {0, 0, 0}));
  EXPECT_EQ(e.sum({0}).shape(), (Shape{3}));
  EXPECT_EQ(e.sum({0}, true).shape(), (Shape{1, 3}));
  EXPECT_TRUE(test::close(e.prod({0}), {1, 1, 1}));
  EXPECT_TRUE(test::close(e.all({0}), {1, 1, 1}));
  EXPECT_TRUE(test::close(e.any({0}), {0, 0, 0}));
  EXPECT_TRUE(test::close(e.mean({0}), {kNaN, kNaN, kNaN}));
  // Reducing the non-empty dim leaves an empty result, which is fine for every op.
  EXPECT_EQ(e.sum({1}).shape(), (Shape{0}));
  EXPECT_EQ(e.max({1}).shape(), (Shape{0}));
  EXPECT_EQ(e.argmax(1, true).shape(), (Shape{0, 1}));
  EXPECT_EQ(e.var(Dims{1}).shape(), (Shape{0}));

  Tensor ei = Tensor::empty({2, 0}, kInt32);
  EXPECT_EQ(ei.sum().dtype(), kInt64);
  EXPECT_TRUE(test::close(ei.sum({1}), {0, 0}));
  EXPECT_TRUE(test::close(ei.prod({1}), {1, 1}));
  EXPECT_EQ(ei.prod({1}).dtype(), kInt64);
}

TEST(Reduce, EmptyReductionWithoutIdentityThrows) {
  Tensor e = Tensor::empty({0, 3}, kFloat32);
  THD_EXPECT_THROW_MSG(e.max(), ValueError, "does not have an identity");
  THD_EXPECT_THROW_MSG(e.min(), ValueError, "min");
  THD_EXPECT_THROW_MSG(e.max({0}), IndexError, "Expected reduction dim 0 to have non-zero size");
  THD_EXPECT_THROW_MSG(e.min({0, 1}, true), IndexError, "non-zero size");
  THD_EXPECT_THROW_MSG(e.max({}), ValueError, "identity");
  THD_EXPECT_THROW_MSG(e.argmax(), ValueError, "numel() == 0");
  THD_EXPECT_THROW_MSG(e.argmin(0), IndexError, "non-zero size");
  THD_EXPECT_THROW_MSG(e.norm(kInf), ValueError, "inf norm");
  THD_EXPECT_THROW_MSG(e.norm(-kInf, {0}), IndexError, "non-zero size");
}

// ---- NaN, inf and integer edge cases ------------------------------------------------

TEST(Reduce, NaNPropagates) {
  for (DType dt : test::float_dtypes()) {
    // A NaN past the first vector block and one in a short tail.
    std::vector<double> v(2000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 37) - 18;
    v[1500] = kNaN;
    v[1998] = kNaN;
    Tensor t = test::make({2000}, dt, v);
    EXPECT_TRUE(std::isnan(t.max().item<double>())) << dt;
    EXPECT_TRUE(std::isnan(t.min().item<double>())) << dt;
    EXPECT_TRUE(std::isnan(t.sum().item<double>())) << dt;
    EXPECT_TRUE(std::isnan(t.norm(kInf).item<double>())) << dt;
    EXPECT_EQ(t.argmax().item<int64_t>(), 1500) << dt;
    EXPECT_EQ(t.argmin().item<int64_t>(), 1500) << dt;
    EXPECT_TRUE(t.any().item<bool>());
    Tensor m = t.view({40, 50});  // the NaNs sit in rows 30 and 39, columns 0 and 48
    EXPECT_TRUE(matches(m.max({1}), m, {1}, false, ref_max, dt)) << dt;
    EXPECT_TRUE(matches(m.max({0}), m, {0}, false, ref_max, dt)) << dt;
    EXPECT_TRUE(matches(m.min({0}), m, {0}, false, ref_min, dt)) << dt;
    EXPECT_TRUE(matches(m.argmax(0), m, {0}, false, ref_argmax, kInt64)) << dt;
    EXPECT_TRUE(matches(m.argmin(1), m, {1}, false, ref_argmin, kInt64)) << dt;
  }
  // NaN in a float32 block is found by the vector path, inf is not mistaken for it.
  std::vector<double> v(4096, 1.0);
  v[100] = kInf;
  v[3000] = -kInf;
  Tensor t = test::make({4096}, kFloat32, v);
  EXPECT_EQ(t.max().item<double>(), kInf);
  EXPECT_EQ(t.min().item<double>(), -kInf);
  EXPECT_EQ(t.norm(-kInf).item<double>(), 1.0);
  EXPECT_EQ(t.argmin().item<int64_t>(), 3000);
  v[2000] = kNaN;
  EXPECT_TRUE(std::isnan(test::make({4096}, kFloat32, v).max().item<double>()));
}

TEST(Reduce, IntegerSumsAccumulateInInt64AndWrap) {
  Tensor t = Tensor::full({1000}, 127, kInt8);
  EXPECT_EQ(t.sum().dtype(), kInt64);
  EXPECT_EQ(t.sum().item<int64_t>(), 127000);
  Tensor u = Tensor::full({300}, 255, kUInt8);
  EXPECT_EQ(u.sum().item<int64_t>(), 76500);
  EXPECT_EQ(Tensor::full({40}, 2, kInt32).prod().item<int64_t>(), int64_t{1} << 40);
  Tensor b = test::make({5}, kBool, {1, 0, 1, 1, 0});
  EXPECT_EQ(b.sum().dtype(), kInt64);
  EXPECT_EQ(b.sum().item<int64_t>(), 3);
  EXPECT_EQ(b.prod().item<int64_t>(), 0);
  EXPECT_EQ(b.max().dtype(), kBool);
  EXPECT_TRUE(b.max().item<bool>());
  EXPECT_FALSE(b.min().item<bool>());
  // torch wraps around on int64 overflow.
  Tensor big = Tensor::from_vector<int64_t>({std::numeric_limits<int64_t>::max(), 1});
  EXPECT_EQ(big.sum().item<int64_t>(), std::numeric_limits<int64_t>::min());
  Tensor ext = Tensor::from_vector<int64_t>({std::numeric_limits<int64_t>::min(), -5, 3});
  EXPECT_EQ(ext.min().item<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ext.argmin().item<int64_t>(), 0);
  EXPECT_EQ(ext.max().item<int64_t>(), 3);
}

TEST(Reduce, VarBracedListMeansDims) {
  // A braced list is always dims: there is no var(int64_t correction) to bind to.
  Tensor t = test::make({2, 3}, kFloat64, {1, 2, 3, 5, 7, 9});
  EXPECT_EQ(t.var({1}).shape(), (Shape{2}));
  EXPECT_TRUE(test::close(t.var({1}), {1.0, 4.0}));
  EXPECT_TRUE(test::close(t.std({0}, 0), {2.0, 2.5, 3.0}));
  EXPECT_EQ(t.var(Dims{}, 0).dim(), 0);  // every element, correction 0
}

TEST(Reduce, VarianceWithoutDegreesOfFreedom) {
  // As torch: the divisor is max(0, N - correction), so 0 / 0 = nan and m2 / 0 = inf.
  Tensor one = Tensor::from_vector<double>({4.0});
  EXPECT_TRUE(std::isnan(one.var().item<double>()));
  EXPECT_TRUE(std::isnan(one.std().item<double>()));
  EXPECT_EQ(one.var(Dims{}, 0).item<double>(), 0.0);
  Tensor two = Tensor::from_vector<float>({1.0f, 2.0f});
  EXPECT_EQ(two.var(Dims{}, 2).item<double>(), kInf);
  EXPECT_EQ(two.var(Dims{}, 5).item<double>(), kInf);
  EXPECT_DOUBLE_EQ(two.var(Dims{}, 1).item<double>(), 0.5);
  EXPECT_DOUBLE_EQ(two.var(Dims{}, 0).item<double>(), 0.25);
  // Far from zero, a one-pass sum of squares would cancel to garbage.
  Tensor off = Tensor::from_vector<double>({1e9 + 1, 1e9 + 2, 1e9 + 3, 1e9 + 4});
  EXPECT_DOUBLE_EQ(off.var().item<double>(), 5.0 / 3.0);
  Tensor offf = Tensor::from_vector<float>({10000.5f, 10001.5f, 10002.5f});
  EXPECT_NEAR(offf.var().item<double>(), 1.0, 1e-6);
}

// ---- large tensors: the parallel and vectorized paths --------------------------------

std::vector<double> uniform(int64_t n, uint32_t seed, double lo, double hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = u(rng);
  return v;
}

TEST(Reduce, LargeFloat32SumIsAccurate) {
  // 4M values in [0, 1): past 2^24 / 2 a running float sum stops adding most of them.
  const int64_t n = int64_t{1} << 22;
  Tensor t = test::make({n}, kFloat32, uniform(n, 43, 0, 1));
  const std::vector<double> v = values(t);  // the float32 values themselves
  double s = 0, sq = 0, mx = -1;
  int64_t amx = 0;
  for (int64_t i = 0; i < n; ++i) {
    s += v[i];
    sq += v[i] * v[i];
    if (v[i] > mx) {
      mx = v[i];
      amx = i;
    }
  }
  EXPECT_NEAR(t.sum().item<double>(), s, s * 1e-6);
  EXPECT_NEAR(t.mean().item<double>(), s / static_cast<double>(n), 1e-6);
  EXPECT_NEAR(t.norm().item<double>(), std::sqrt(sq), std::sqrt(sq) * 1e-6);
  double m2 = 0;
  for (double x : v) m2 += (x - s / static_cast<double>(n)) * (x - s / static_cast<double>(n));
  EXPECT_NEAR(t.var().item<double>(), m2 / static_cast<double>(n - 1), 1e-6);
  EXPECT_EQ(t.max().item<double>(), mx);
  EXPECT_EQ(t.argmax().item<int64_t>(), amx);
  // The same through a strided view (every other element).
  Tensor h = t.slice(0, 0, n, 2);
  double hs = 0;
  for (int64_t i = 0; i < n; i += 2) hs += v[i];
  EXPECT_NEAR(h.sum().item<double>(), hs, hs * 1e-6);
}

TEST(Reduce, LargeReductionsAlongEachDim) {
  struct Case {
    Shape shape;
    Dims dims;
  };
  // Outer-dim reductions (rows), inner ones (runs), few large outputs, many tiny
  // ones, tiles that do not divide the row, and a transposed input.
  const std::vector<Case> cases = {
      {{2048, 1030}, {0}}, {{2048, 1030}, {1}}, {{3, 700000}, {1}}, {{700000, 3}, {0}},
      {{700000, 3}, {1}},  {{1100, 4100}, {0}}, {{64, 128, 300}, {0, 2}}, {{300, 64, 128}, {1}},
  };
  for (const Case& c : cases) {
    int64_t n = 1;
    for (int64_t s : c.shape) n *= s;
    Tensor t = test::make(c.shape, kFloat32, uniform(n, 47, -1, 1));
    const std::string l = shape_str(c.shape) + " dims " + shape_str(c.dims);
    const Grouped g = group(t, c.dims, false);
    EXPECT_TRUE(matches(t.sum(c.dims), g, ref_sum, kFloat32, 1e-5)) << l;
    EXPECT_TRUE(matches(t.max(c.dims), g, ref_max, kFloat32)) << l;
    EXPECT_TRUE(matches(t.var(c.dims), g, ref_var(1, false), kFloat32, 1e-5)) << l;
    if (c.dims.size() == 1) {
      EXPECT_TRUE(matches(t.argmin(c.dims[0]), g, ref_argmin, kInt64)) << l;
    }
    Shape kept = c.shape;
    for (int64_t d : c.dims) kept[d] = 1;
    EXPECT_EQ(t.max(c.dims, true).shape(), kept) << l;
  }
  Tensor big = test::make({1500, 1200}, kFloat64, uniform(1500 * 1200, 53, -1, 1));
  Tensor tr = big.t();
  EXPECT_TRUE(matches(tr.sum({0}), tr, {0}, false, ref_sum, kFloat64, 1e-10));
  EXPECT_TRUE(matches(tr.sum({1}), tr, {1}, false, ref_sum, kFloat64, 1e-10));
  EXPECT_TRUE(matches(tr.argmax(1), tr, {1}, false, ref_argmax, kInt64));
}

TEST(Reduce, LargeHalfAndIntegerSums) {
  const int64_t n = 1 << 20;
  for (DType dt : {kFloat16, kBFloat16}) {
    // Small values: float16 cannot hold a sum past 65504.
    Tensor t = test::make({n}, dt, uniform(n, 59, 0, 0.05));
    const double ref = ref_sum(values(t));
    // Accumulated in float32 blocks and double: only the final rounding to 16 bits.
    EXPECT_NEAR(t.sum().item<double>(), ref, ref * test::tolerance(dt)) << dt;
    EXPECT_NEAR(t.mean().item<double>(), ref / n, test::tolerance(dt)) << dt;
  }
  Tensor i = test::make({n}, kInt32, test::sample(n, kInt32, 61));
  const std::vector<double> iv = values(i);
  EXPECT_EQ(i.sum().item<int64_t>(), static_cast<int64_t>(ref_sum(iv)));
  Tensor b = test::make({n}, kBool, test::sample(n, kBool, 67));
  EXPECT_EQ(b.sum().item<int64_t>(), static_cast<int64_t>(ref_sum(values(b))));
  EXPECT_FALSE(b.all().item<bool>());
  EXPECT_TRUE(Tensor::ones({n}, kBool).all().item<bool>());
  Tensor z = Tensor::zeros({n}, kUInt8);
  EXPECT_FALSE(z.any().item<bool>());
}

// ---- errors -----------------------------------------------------------------------

TEST(Reduce, Errors) {
  Tensor i = Tensor::zeros({2, 3}, kInt64);
  THD_EXPECT_THROW_MSG(i.mean(), TypeError, "mean: could not infer output dtype");
  THD_EXPECT_THROW_MSG(i.mean({0}), TypeError, "Got: int64");
  THD_EXPECT_THROW_MSG(i.var(), TypeError, "std and var only support floating point");
  THD_EXPECT_THROW_MSG(Tensor::zeros({2}, kBool).std(Dims{0}), TypeError, "std:");
  THD_EXPECT_THROW_MSG(i.norm(), TypeError, "norm: Expected a floating point tensor");
  THD_EXPECT_THROW_MSG(Tensor::zeros({2}, kBool).argmax(), TypeError, "argmax");
  Tensor f = Tensor::zeros({2, 3}, kFloat32);
  THD_EXPECT_THROW_MSG(f.sum({2}), IndexError, "dim 2 is out of range");
  THD_EXPECT_THROW_MSG(f.max({-3}), IndexError, "out of range");
  THD_EXPECT_THROW_MSG(f.sum({0, -2}), IndexError, "appears more than once");
  THD_EXPECT_THROW_MSG(f.var({1, 1}), IndexError, "more than once");
  THD_EXPECT_THROW_MSG(f.argmax(2), IndexError, "argmax");
  THD_EXPECT_THROW_MSG(Tensor().sum(), ValueError, "sum");
  THD_EXPECT_THROW_MSG(Tensor().argmin(), ValueError, "argmin");
}

}  // namespace
}  // namespace thd
