// The fast paths small ops take, against the general paths they stand in for:
// elementwise ops on contiguous operands of one shape (plan_flat), full reductions of
// contiguous tensors (one run), fill_/copy_ of contiguous tensors, and the one-block
// storage of small tensors. The same operands made non-contiguous (strided copies)
// take the general path; both must give the same bits, or throw the same error (the
// same message from the same source line).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include <thd/memory.h>
#include <thd/tensor.h>

#include "tensor/reduce_util.h"
#include "tensor/reference.h"

namespace thd {
namespace {

using test::all_dtypes;

// A non-contiguous tensor with t's values (every dim of size > 1 has twice the
// contiguous stride): elementwise ops on it take the general path.
Tensor strided(const Tensor& t) {
  Shape big = t.shape();
  for (auto& s : big) s *= 2;
  Tensor v = Tensor::zeros(big, t.dtype());
  for (int64_t d = 0; d < t.dim(); ++d) v = v.slice(d, 0, big[d], 2);
  v.copy_(t);
  if (t.numel() > 1) {
    EXPECT_FALSE(v.is_contiguous());
  }
  return v;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return std::vector<uint8_t>(p, p + c.nbytes());
}

// What an op did: its result (dtype, shape, bytes) or the error it threw.
struct Outcome {
  std::string error;  // "TypeError: add: ... (file:line)"; empty when it returned
  DType dtype = kFloat32;
  Shape shape;
  std::vector<uint8_t> bytes;
};

template <typename F>
Outcome outcome(F&& f) {
  Outcome o;
  try {
    Tensor t = f();
    o.dtype = t.dtype();
    o.shape = t.shape();
    o.bytes = bytes_of(t);
  } catch (const Error& e) {
    o.error = std::string(typeid(e).name()) + ": " + e.what();
  }
  return o;
}

::testing::AssertionResult same(const Outcome& fast, const Outcome& general) {
  if (fast.error != general.error) {
    return ::testing::AssertionFailure() << "errors differ:\n  fast:    '" << fast.error
                                         << "'\n  general: '" << general.error << "'";
  }
  if (!fast.error.empty()) return ::testing::AssertionSuccess();
  if (fast.dtype != general.dtype) {
    return ::testing::AssertionFailure() << "dtype " << fast.dtype << " vs " << general.dtype;
  }
  if (fast.shape != general.shape) {
    return ::testing::AssertionFailure() << "shape " << shape_str(fast.shape) << " vs "
                                         << shape_str(general.shape);
  }
  if (fast.bytes != general.bytes) return ::testing::AssertionFailure() << "values differ";
  return ::testing::AssertionSuccess();
}

std::string pair_name(DType a, DType b) {
  return std::string(dtype_name(a)) + " and " + std::string(dtype_name(b));
}

using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;

const std::vector<std::pair<const char*, BinaryFn>>& binary_ops() {
  static const std::vector<std::pair<const char*, BinaryFn>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a.add(b); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a.sub(b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a.mul(b); }},
      {"div", [](const Tensor& a, const Tensor& b) { return a.div(b); }},
      {"pow", [](const Tensor& a, const Tensor& b) { return a.pow(b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return a.maximum(b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return a.minimum(b); }},
      {"eq", [](const Tensor& a, const Tensor& b) { return a.eq(b); }},
      {"ne", [](const Tensor& a, const Tensor& b) { return a.ne(b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return a.lt(b); }},
      {"ge", [](const Tensor& a, const Tensor& b) { return a.ge(b); }},
  };
  return ops;
}

using InplaceFn = std::function<void(Tensor&, const Tensor&)>;

const std::vector<std::pair<const char*, InplaceFn>>& inplace_ops() {
  static const std::vector<std::pair<const char*, InplaceFn>> ops = {
      {"add_", [](Tensor& a, const Tensor& b) { a.add_(b); }},
      {"sub_", [](Tensor& a, const Tensor& b) { a.sub_(b); }},
      {"mul_", [](Tensor& a, const Tensor& b) { a.mul_(b); }},
      {"div_", [](Tensor& a, const Tensor& b) { a.div_(b); }},
      {"pow_", [](Tensor& a, const Tensor& b) { a.pow_(b); }},
  };
  return ops;
}

// Mixed signs (negative integer powers fail), and positive values (they do not).
std::vector<Tensor> operands(const Shape& shape, DType dtype, uint32_t seed) {
  return {test::sample_tensor(shape, dtype, seed), test::sample_tensor(shape, dtype, seed + 7, true)};
}

TEST(SmallOps, BinaryOpsMatchTheGeneralPathForEveryDTypePair) {
  for (DType da : all_dtypes()) {
    for (DType db : all_dtypes()) {
      for (const auto& [name, fn] : binary_ops()) {
        for (const Tensor& a : operands({2, 5}, da, 1)) {
          for (const Tensor& b : operands({2, 5}, db, 2)) {
            const Outcome fast = outcome([&] { return fn(a, b); });
            EXPECT_TRUE(same(fast, outcome([&] { return fn(strided(a), strided(b)); })))
                << name << " of " << pair_name(da, db);
            EXPECT_TRUE(same(fast, outcome([&] { return fn(a, strided(b)); })))
                << name << " of " << pair_name(da, db) << ", b strided";
          }
        }
      }
    }
  }
}

TEST(SmallOps, ZeroDimOperandsAreReadAsScalars) {
  for (DType da : all_dtypes()) {
    for (DType db : all_dtypes()) {
      const Tensor a = test::sample_tensor({6}, da, 3, true);
      const Tensor s = test::sample_tensor({}, db, 4, true);
      for (const auto& [name, fn] : binary_ops()) {
        const Outcome right = outcome([&] { return fn(a, s); });
        EXPECT_TRUE(same(right, outcome([&] { return fn(strided(a), s); })))
            << name << " of " << pair_name(da, db);
        const Outcome left = outcome([&] { return fn(s, a); });
        EXPECT_TRUE(same(left, outcome([&] { return fn(s, strided(a)); })))
            << name << " of " << pair_name(db, da);
        // Two 0-dim operands of one dtype: a 0-dim result; its value is what the
        // general path gives for each element of a strided tensor of copies of the
        // first. (With two dtypes, dimensioned and 0-dim operands promote differently.)
        if (da != db) continue;
        const Tensor s2 = test::sample_tensor({}, da, 5, true);
        const Outcome both = outcome([&] { return fn(s2, s); });
        if (both.error.empty()) {
          EXPECT_EQ(both.shape, Shape{});
        }
        const Tensor copies = strided(s2.reshape({1}).expand({2}).contiguous());
        EXPECT_TRUE(same(both, outcome([&] { return fn(copies, s).select(0, 1); })))
            << name << " of 0-dim " << pair_name(da, db);
      }
    }
  }
}

TEST(SmallOps, ScalarOperandsMatchTheGeneralPath) {
  const std::vector<Scalar> scalars = {Scalar(3), Scalar(-2), Scalar(2.5), Scalar(true),
                                       Scalar(int64_t{1} << 40), Scalar(1e300)};
  using ScalarFn = std::function<Tensor(const Tensor&, const Scalar&)>;
  const std::vector<std::pair<const char*, ScalarFn>> ops = {
      {"add", [](const Tensor& a, const Scalar& s) { return a.add(s); }},
      {"sub", [](const Tensor& a, const Scalar& s) { return a.sub(s); }},
      {"mul", [](const Tensor& a, const Scalar& s) { return a.mul(s); }},
      {"div", [](const Tensor& a, const Scalar& s) { return a.div(s); }},
      {"pow", [](const Tensor& a, const Scalar& s) { return a.pow(s); }},
      {"lt", [](const Tensor& a, const Scalar& s) { return a.lt(s); }},
      {"s+a", [](const Tensor& a, const Scalar& s) { return s + a; }},
      {"s-a", [](const Tensor& a, const Scalar& s) { return s - a; }},
      {"s*a", [](const Tensor& a, const Scalar& s) { return s * a; }},
      {"s/a", [](const Tensor& a, const Scalar& s) { return s / a; }},
      {"add_", [](const Tensor& a, const Scalar& s) { Tensor x = a.clone(); return x.add_(s); }},
      {"sub_", [](const Tensor& a, const Scalar& s) { Tensor x = a.clone(); return x.sub_(s); }},
      {"mul_", [](const Tensor& a, const Scalar& s) { Tensor x = a.clone(); return x.mul_(s); }},
      {"div_", [](const Tensor& a, const Scalar& s) { Tensor x = a.clone(); return x.div_(s); }},
      {"pow_", [](const Tensor& a, const Scalar& s) { Tensor x = a.clone(); return x.pow_(s); }},
  };
  for (DType dt : all_dtypes()) {
    for (const Tensor& a : operands({3, 4}, dt, 6)) {
      for (const Scalar& s : scalars) {
        for (const auto& [name, fn] : ops) {
          EXPECT_TRUE(same(outcome([&] { return fn(a, s); }), outcome([&] { return fn(strided(a), s); })))
              << name << " of " << dtype_name(dt) << " and scalar " << s.to_double();
        }
      }
    }
  }
}

// self op= other, on a contiguous self (fast when dtypes allow) and on a strided one.
// On error, self must be left as it was.
TEST(SmallOps, InPlaceOpsMatchTheGeneralPathIncludingDTypeChanges) {
  for (DType ds : all_dtypes()) {
    for (DType dother : all_dtypes()) {
      for (const auto& [name, fn] : inplace_ops()) {
        const Tensor a = test::sample_tensor({2, 4}, ds, 8, true);
        for (const Tensor& b : operands({2, 4}, dother, 9)) {
          auto run = [&, fn = fn](Tensor self, const Tensor& other) {
            Outcome o = outcome([&] {
              fn(self, other);
              return self;
            });
            if (!o.error.empty()) {
              EXPECT_EQ(bytes_of(self), bytes_of(a)) << "self changed by a failed op";
            }
            return o;
          };
          EXPECT_TRUE(same(run(a.clone(), b), run(strided(a), strided(b))))
              << name << " of " << pair_name(ds, dother);
          EXPECT_TRUE(same(run(a.clone(), b), run(a.clone(), strided(b))))
              << name << " of " << pair_name(ds, dother) << ", other strided";
        }
      }
    }
  }
}

TEST(SmallOps, InPlaceWithItselfAsTheOtherOperand) {
  for (DType dt : all_dtypes()) {
    for (const auto& [name, fn] : inplace_ops()) {
      const Tensor a = test::sample_tensor({7}, dt, 10, true);
      const Outcome fast = outcome([&, fn = fn] {
        Tensor x = a.clone();
        fn(x, x);
        return x;
      });
      const Outcome general = outcome([&, fn = fn] {
        Tensor x = strided(a);
        fn(x, x);
        return x;
      });
      EXPECT_TRUE(same(fast, general)) << name << " of " << dtype_name(dt);
    }
  }
}

// Inputs that overlap the output without being it are read before anything is written.
TEST(SmallOps, InPlaceReadsOverlappingInputsBeforeWriting) {
  for (DType dt : {kInt32, kInt64, kFloat32, kFloat64}) {
    const Tensor orig = test::sample_tensor({9}, dt, 11);
    const std::vector<double> v = test::values(orig);

    // A shifted view of self: out[i] = x[i + 1] + x[i], both original values.
    Tensor x = orig.clone();
    x.slice(0, 1, 9).add_(x.slice(0, 0, 8));
    std::vector<double> expected = v;
    for (size_t i = 1; i < 9; ++i) expected[i] = v[i] + v[i - 1];
    EXPECT_TRUE(test::close(x, expected)) << dtype_name(dt);

    // A 0-dim view of one of self's elements: every element reads its old value.
    Tensor y = orig.clone();
    y.mul_(y.select(0, 4));
    for (size_t i = 0; i < 9; ++i) expected[i] = v[i] * v[4];
    EXPECT_TRUE(test::close(y, expected)) << dtype_name(dt);

    // copy_ from an overlapping view moves values as memmove would.
    Tensor z = orig.clone();
    z.slice(0, 1, 9).copy_(z.slice(0, 0, 8));
    expected = v;
    for (size_t i = 1; i < 9; ++i) expected[i] = v[i - 1];
    EXPECT_TRUE(test::close(z, expected)) << dtype_name(dt);
  }
}

TEST(SmallOps, InPlaceOnDisjointViewsOfOneStorage) {
  const Tensor base = test::sample_tensor({16}, kFloat32, 12);
  const std::vector<double> v = test::values(base);
  Tensor buf = base.clone();
  Tensor lo = buf.slice(0, 0, 8), hi = buf.slice(0, 8, 16);
  lo.sub_(hi);
  std::vector<double> expected = v;
  for (size_t i = 0; i < 8; ++i) expected[i] = v[i] - v[i + 8];
  EXPECT_TRUE(test::close(buf, expected));
}

TEST(SmallOps, BroadcastGivesWhatTheExpandedOperandGives) {
  for (DType dt : all_dtypes()) {
    const Tensor a = test::sample_tensor({4, 3}, dt, 13, true);
    for (const Shape& bs : {Shape{3}, Shape{1}, Shape{4, 1}, Shape{1, 3}}) {
      const Tensor b = test::sample_tensor(bs, dt, 14, true);
      const Tensor be = b.expand({4, 3}).contiguous();
      for (const auto& [name, fn] : binary_ops()) {
        EXPECT_TRUE(same(outcome([&] { return fn(a, b); }), outcome([&] { return fn(a, be); })))
            << name << " of " << dtype_name(dt) << " broadcasting " << shape_str(bs);
      }
      Tensor x = a.clone(), y = a.clone();
      const Outcome broadcast = outcome([&] { return x.add_(b); });
      EXPECT_TRUE(same(broadcast, outcome([&] { return y.add_(be); }))) << dtype_name(dt);
    }
  }
}

TEST(SmallOps, ZeroElementTensors) {
  for (DType dt : all_dtypes()) {
    for (const Shape& shape : {Shape{0}, Shape{2, 0}}) {
      const Tensor a = Tensor::empty(shape, dt), b = Tensor::empty(shape, dt);
      for (const auto& [name, fn] : binary_ops()) {
        const Outcome o = outcome([&] { return fn(a, b); });
        EXPECT_TRUE(same(o, outcome([&] { return fn(strided(a), b); }))) << name;
        if (o.error.empty()) {
          EXPECT_EQ(o.shape, shape) << name;
        }
      }
      EXPECT_EQ(a.exp().shape(), shape);
      Tensor x = a.clone();
      EXPECT_NO_THROW(x.fill_(1));
      EXPECT_NO_THROW(x.copy_(b));
    }
  }
  // No elements, but expanded: every write is refused, as for any expanded tensor.
  Tensor z = Tensor::zeros({1, 0}).expand({3, 0});
  THD_EXPECT_THROW_MSG(z.add_(1), ValueError, "single memory location");
  THD_EXPECT_THROW_MSG(z.neg_(), ValueError, "single memory location");
  THD_EXPECT_THROW_MSG(z.fill_(1), ValueError, "single memory location");
}

TEST(SmallOps, IntegerArithmeticWrapsAround) {
  auto ints = [](DType dt, std::vector<double> v) { return test::make({static_cast<int64_t>(v.size())}, dt, v); };
  EXPECT_EQ(ints(kInt8, {127, -128}).add(ints(kInt8, {1, -1})).to_vector<int64_t>(),
            (std::vector<int64_t>{-128, 127}));
  EXPECT_EQ(ints(kUInt8, {250, 3}).add(10).to_vector<int64_t>(), (std::vector<int64_t>{4, 13}));
  EXPECT_EQ(ints(kUInt8, {3, 0}).sub(ints(kUInt8, {4, 1})).to_vector<int64_t>(),
            (std::vector<int64_t>{255, 255}));
  Tensor i32 = Tensor::full({3}, std::numeric_limits<int32_t>::max(), kInt32);
  i32.add_(1);
  EXPECT_EQ(i32.to_vector<int32_t>(), std::vector<int32_t>(3, std::numeric_limits<int32_t>::min()));
  Tensor i64 = Tensor::full({2}, std::numeric_limits<int64_t>::max(), kInt64);
  EXPECT_EQ(i64.mul(2).to_vector<int64_t>(), (std::vector<int64_t>{-2, -2}));
  EXPECT_EQ(ints(kInt8, {-128, 5}).neg().to_vector<int64_t>(), (std::vector<int64_t>{-128, -5}));
  // int64 sums wrap too.
  EXPECT_EQ(i64.sum().item<int64_t>(), -2);
}

using UnaryFn = std::function<Tensor(const Tensor&)>;

TEST(SmallOps, UnaryOpsMatchTheGeneralPath) {
  const std::vector<std::pair<const char*, UnaryFn>> ops = {
      {"neg", [](const Tensor& t) { return t.neg(); }},
      {"abs", [](const Tensor& t) { return t.abs(); }},
      {"relu", [](const Tensor& t) { return t.relu(); }},
      {"exp", [](const Tensor& t) { return t.exp(); }},
      {"log", [](const Tensor& t) { return t.log(); }},
      {"sqrt", [](const Tensor& t) { return t.sqrt(); }},
      {"rsqrt", [](const Tensor& t) { return t.rsqrt(); }},
      {"sin", [](const Tensor& t) { return t.sin(); }},
      {"cos", [](const Tensor& t) { return t.cos(); }},
      {"tanh", [](const Tensor& t) { return t.tanh(); }},
      {"sigmoid", [](const Tensor& t) { return t.sigmoid(); }},
      {"gelu", [](const Tensor& t) { return t.gelu(); }},
      {"clamp", [](const Tensor& t) { return t.clamp(Scalar(-2), Scalar(2.5)); }},
      {"neg_", [](const Tensor& t) { Tensor x = t; return x.neg_(); }},
      {"abs_", [](const Tensor& t) { Tensor x = t; return x.abs_(); }},
      {"exp_", [](const Tensor& t) { Tensor x = t; return x.exp_(); }},
      {"sigmoid_", [](const Tensor& t) { Tensor x = t; return x.sigmoid_(); }},
      {"clamp_", [](const Tensor& t) { Tensor x = t; return x.clamp_(std::nullopt, Scalar(1)); }},
  };
  for (DType dt : all_dtypes()) {
    for (const Shape& shape : {Shape{11}, Shape{3, 4}}) {
      const Tensor a = test::sample_tensor(shape, dt, 15);
      for (const auto& [name, fn] : ops) {
        EXPECT_TRUE(same(outcome([&] { return fn(a.clone()); }), outcome([&] { return fn(strided(a)); })))
            << name << " of " << dtype_name(dt);
      }
    }
  }
}

TEST(SmallOps, FillMatchesTheGeneralPath) {
  const std::vector<Scalar> values = {Scalar(0), Scalar(-3), Scalar(2.75), Scalar(true), Scalar(300),
                                      Scalar(1e40)};
  for (DType dt : all_dtypes()) {
    for (const Scalar& v : values) {
      const Tensor a = test::sample_tensor({3, 5}, dt, 16);
      const Outcome fast = outcome([&] {
        Tensor x = a.clone();
        return x.fill_(v);
      });
      EXPECT_TRUE(same(fast, outcome([&] {
        Tensor x = strided(a);
        return x.fill_(v);
      }))) << dtype_name(dt) << " filled with " << v.to_double();
    }
  }
}

TEST(SmallOps, CopyMatchesTheGeneralPath) {
  for (DType dd : all_dtypes()) {
    for (DType ds : all_dtypes()) {
      const Tensor src = test::sample_tensor({3, 5}, ds, 17);
      const Tensor dst = test::sample_tensor({3, 5}, dd, 18);
      const Outcome fast = outcome([&] {
        Tensor x = dst.clone();
        return x.copy_(src);
      });
      EXPECT_TRUE(same(fast, outcome([&] {
        Tensor x = strided(dst);
        return x.copy_(strided(src));
      }))) << "copy_ of " << pair_name(ds, dd);
      // A broadcast source, and one that does not broadcast.
      const Tensor row = test::sample_tensor({5}, ds, 19);
      EXPECT_TRUE(same(outcome([&] {
        Tensor x = dst.clone();
        return x.copy_(row);
      }), outcome([&] {
        Tensor x = dst.clone();
        return x.copy_(row.expand({3, 5}).contiguous());
      })));
      const Outcome bad = outcome([&] {
        Tensor x = dst.clone();
        return x.copy_(test::sample_tensor({4}, ds, 20));
      });
      EXPECT_NE(bad.error.find("ShapeError"), std::string::npos) << bad.error;
    }
  }
}

using ReduceFn = std::function<Tensor(const Tensor&)>;

// Below 64 elements a contiguous run and a strided walk fold in the same order, so
// the one-run shortcut must match the general walk bit for bit.
TEST(SmallOps, FullReductionsMatchTheGeneralPath) {
  const std::vector<std::pair<const char*, ReduceFn>> ops = {
      {"sum", [](const Tensor& t) { return t.sum(); }},
      {"sum(all dims)", [](const Tensor& t) { return t.sum(Dims{}, true); }},
      {"mean", [](const Tensor& t) { return t.mean(); }},
      {"prod", [](const Tensor& t) { return t.prod(); }},
      {"max", [](const Tensor& t) { return t.max(); }},
      {"min", [](const Tensor& t) { return t.min(); }},
      {"argmax", [](const Tensor& t) { return t.argmax(); }},
      {"argmin", [](const Tensor& t) { return t.argmin(); }},
      {"norm", [](const Tensor& t) { return t.norm(); }},
      {"norm1", [](const Tensor& t) { return t.norm(1.0); }},
      {"norm3", [](const Tensor& t) { return t.norm(3.0); }},
      {"any", [](const Tensor& t) { return t.any(); }},
      {"all", [](const Tensor& t) { return t.all(); }},
  };
  for (DType dt : all_dtypes()) {
    for (const Shape& shape : {Shape{16}, Shape{3, 5}, Shape{2, 1, 7}, Shape{63}, Shape{0}}) {
      const Tensor a = test::sample_tensor(shape, dt, 21);
      for (const auto& [name, fn] : ops) {
        EXPECT_TRUE(same(outcome([&] { return fn(a); }), outcome([&] { return fn(strided(a)); })))
            << name << " of " << dtype_name(dt) << " " << shape_str(shape);
      }
    }
  }
}

TEST(SmallOps, SumOfAFloatTensorHasTheSequentialValue) {
  // Below 64 elements the sum folds one element at a time in double.
  const Tensor a = test::make({5}, kFloat32, {1e8, 1, -1e8, 0.25, 3});
  const Tensor s = a.sum();
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<float>(), static_cast<float>((((1e8 + 1.0) - 1e8) + 0.25) + 3.0));
}

// The shortcut for a contiguous tensor reduced whole finds what sorting and merging
// its dims finds.
TEST(SmallOps, OneRunReduceGeometryIsWhatMergingFinds) {
  for (const Shape& shape : {Shape{2}, Shape{16}, Shape{3, 5}, Shape{2, 1, 7}, Shape{1, 9, 1},
                             Shape{4, 3, 2, 2}, Shape{100000}}) {
    const Tensor t = Tensor::empty(shape, kFloat64);
    const std::vector<bool> all(shape.size(), true);
    const detail::ReduceGeometry fast = detail::make_reduce_geometry(t, all);
    const detail::ReduceGeometry merged = detail::merged_reduce_geometry(t, all);
    EXPECT_EQ(fast.base, merged.base);
    EXPECT_EQ(fast.n_out, merged.n_out);
    EXPECT_EQ(fast.n_red, merged.n_red);
    EXPECT_EQ(fast.inner_kept, merged.inner_kept);
    EXPECT_TRUE(fast.kept.empty() && merged.kept.empty());
    ASSERT_EQ(fast.reduced.size(), 1u) << shape_str(shape);
    ASSERT_EQ(merged.reduced.size(), 1u) << shape_str(shape);
    EXPECT_EQ(fast.reduced[0].size, merged.reduced[0].size);
    EXPECT_EQ(fast.reduced[0].in, merged.reduced[0].in);
    EXPECT_EQ(fast.reduced[0].out, merged.reduced[0].out);
    EXPECT_EQ(fast.reduced[0].ridx, merged.reduced[0].ridx);
  }
}

TEST(SmallOps, SmallStoragesAreAlignedAndCounted) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{1000},
                    (int64_t{1} << 18) - 1, int64_t{1} << 18}) {
    const MemoryStats before = memory_stats();
    {
      Tensor t = Tensor::empty({n}, kFloat32);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u) << n;
      // Every byte is usable, and the neighbouring tensor's bytes are not touched.
      Tensor u = Tensor::full({3}, 7, kInt8);
      if (n > 0) std::memset(t.data_ptr(), 0xff, t.nbytes());
      EXPECT_EQ(u.to_vector<int8_t>(), std::vector<int8_t>(3, 7));
      const MemoryStats during = memory_stats();
      const int64_t counted = std::max<int64_t>(64, (n * 4 + 63) / 64 * 64);
      const int64_t large = int64_t{1} << 20;
      if (n * 4 < large) {
        EXPECT_EQ(during.allocated_bytes - before.allocated_bytes, counted + 64) << n;
      } else {
        EXPECT_GE(during.allocated_bytes - before.allocated_bytes, n * 4) << n;
      }
      EXPECT_EQ(during.num_allocs - before.num_allocs, 2) << n;
      EXPECT_GE(during.peak_allocated_bytes, during.allocated_bytes);
    }
    EXPECT_EQ(memory_stats().allocated_bytes, before.allocated_bytes) << n;
  }
}

}  // namespace
}  // namespace thd
