#include <gtest/gtest.h>
#include <thd/tensor.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "tensor/reference.h"

namespace thd {
namespace {

using test::values;

using test::numel_of;
using test::ravel;
using test::unravel;

// An index tensor of `shape` whose lines along `dim` hold distinct values in [0, size)
// (a prefix of a random permutation), so scatter results do not depend on write order.
Tensor unique_index(const Shape& shape, int64_t dim, int64_t size, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(static_cast<size_t>(numel_of(shape)));
  Shape outer = shape;
  outer[dim] = 1;
  for (int64_t o = 0; o < numel_of(outer); ++o) {
    std::vector<int64_t> perm(static_cast<size_t>(size));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    auto idx = unravel(o, outer);
    for (int64_t k = 0; k < shape[dim]; ++k) {
      idx[dim] = k;
      v[ravel(idx, shape)] = static_cast<double>(perm[k]);
    }
  }
  return test::make(shape, dtype, v);
}

Tensor random_index(const Shape& shape, int64_t size, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(static_cast<size_t>(numel_of(shape)));
  for (auto& x : v) x = static_cast<double>(rng() % size);
  return test::make(shape, dtype, v);
}

// ---- index_select ---------------------------------------------------------------

std::vector<double> index_select_reference(const Tensor& self, int64_t dim,
                                           const std::vector<double>& index) {
  Shape shape = self.shape();
  shape[dim] = static_cast<int64_t>(index.size());
  std::vector<double> in = values(self), out;
  for (int64_t i = 0; i < numel_of(shape); ++i) {
    auto idx = unravel(i, shape);
    idx[dim] = static_cast<int64_t>(index[idx[dim]]);
    out.push_back(in[ravel(idx, self.shape())]);
  }
  return out;
}

TEST(IndexSelect, EveryDTypeAndDim) {
  for (DType dt : test::all_dtypes()) {
    Tensor self = test::sample_tensor({3, 4, 5}, dt, 1);
    for (int64_t dim : {0, 1, 2, -1, -2}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      for (DType it : {kInt64, kInt32}) {
        // Duplicates and any order are fine for index_select.
        std::vector<double> iv = {static_cast<double>(self.size(d) - 1), 0, 1, 0};
        Tensor index = test::make({4}, it, iv);
        Tensor out = self.index_select(dim, index);
        Shape want = self.shape();
        want[d] = 4;
        EXPECT_EQ(out.shape(), want);
        EXPECT_EQ(out.dtype(), dt);
        EXPECT_EQ(values(out), index_select_reference(self, d, iv)) << dt << " dim " << dim;
      }
    }
  }
}

TEST(IndexSelect, NonContiguousSelfAndIndex) {
  Tensor base = test::sample_tensor({6, 5}, kFloat32, 2);
  Tensor self = base.t();                                                        // [5, 6]
  Tensor index = test::make({6}, kInt64, {5, 4, 3, 2, 1, 0}).slice(0, 0, 6, 2);  // {5, 3, 1}
  std::vector<double> iv = {5, 3, 1};
  EXPECT_EQ(values(self.index_select(1, index)), index_select_reference(self, 1, iv));
  Tensor sliced = base.slice(0, 1, 6, 2);  // [3, 5], row step 2
  std::vector<double> iv2 = {4, 4, 0};
  EXPECT_EQ(values(sliced.index_select(1, test::make({3}, kInt32, iv2))),
            index_select_reference(sliced, 1, iv2));
  Tensor expanded = test::make({1, 3}, kInt8, {1, 2, 3}).expand({4, 3});
  std::vector<double> iv3 = {2, 0};
  EXPECT_EQ(values(expanded.index_select(0, test::make({2}, kInt64, iv3))),
            index_select_reference(expanded, 0, iv3));
}

TEST(IndexSelect, LargeUsesEveryThread) {
  Tensor self = test::sample_tensor({400, 300}, kFloat64, 3);
  Tensor index = random_index({500}, 400, kInt64, 4);
  EXPECT_EQ(values(self.index_select(0, index)), index_select_reference(self, 0, values(index)));
  Tensor index1 = random_index({250}, 300, kInt32, 5);
  EXPECT_EQ(values(self.index_select(1, index1)), index_select_reference(self, 1, values(index1)));
}

TEST(IndexSelect, ScalarsAndEmpty) {
  Tensor self = test::sample_tensor({3, 4}, kInt64, 6);
  // A 0-dim index selects one slice but keeps the dim.
  Tensor out = self.index_select(0, Tensor::full({}, 2, kInt64));
  EXPECT_EQ(out.shape(), (Shape{1, 4}));
  EXPECT_EQ(values(out), index_select_reference(self, 0, {2}));
  Tensor empty = self.index_select(1, Tensor::empty({0}, kInt64));
  EXPECT_EQ(empty.shape(), (Shape{3, 0}));
  EXPECT_EQ(Tensor::empty({0, 4}).index_select(1, test::make({2}, kInt64, {3, 3})).shape(),
            (Shape{0, 2}));
  Tensor s = Tensor::full({}, 7.5, kFloat32);
  Tensor so = s.index_select(0, test::make({1}, kInt64, {0}));
  EXPECT_EQ(so.dim(), 0);
  EXPECT_EQ(values(so), (std::vector<double>{7.5}));
  EXPECT_EQ(values(s.index_select(-1, Tensor::full({}, 0, kInt32))), (std::vector<double>{7.5}));
  THD_EXPECT_THROW_MSG(s.index_select(0, test::make({1}, kInt64, {1})), IndexError,
                       "index 1 is out of bounds for dimension 0 with size 1");
  THD_EXPECT_THROW_MSG(s.index_select(0, test::make({2}, kInt64, {0, 0})), IndexError,
                       "only 1 value");
}

TEST(IndexSelect, Errors) {
  Tensor self = test::sample_tensor({3, 4}, kFloat32, 7);
  THD_EXPECT_THROW_MSG(self.index_select(0, test::make({2}, kFloat32, {0, 1})), TypeError,
                       "int64 or int32");
  THD_EXPECT_THROW_MSG(self.index_select(0, test::make({2}, kInt8, {0, 1})), TypeError, "int8");
  THD_EXPECT_THROW_MSG(self.index_select(0, test::make({2}, kInt64, {0, 3})), IndexError,
                       "index 3 is out of bounds for dimension 0 with size 3");
  THD_EXPECT_THROW_MSG(self.index_select(-1, test::make({2}, kInt32, {-1, 0})), IndexError,
                       "index -1 is out of bounds for dimension 1 with size 4");
  THD_EXPECT_THROW_MSG(self.index_select(0, test::make({1, 2}, kInt64, {0, 1})), IndexError,
                       "vector");
  THD_EXPECT_THROW_MSG(self.index_select(2, test::make({1}, kInt64, {0})), IndexError,
                       "out of range");
  THD_EXPECT_THROW_MSG(self.index_select(0, Tensor()), ValueError, "undefined");
}

// ---- gather -----------------------------------------------------------------------

std::vector<double> gather_reference(const Tensor& self, int64_t dim, const Tensor& index) {
  std::vector<double> in = values(self), iv = values(index), out;
  for (int64_t i = 0; i < index.numel(); ++i) {
    auto idx = unravel(i, index.shape());
    idx[dim] = static_cast<int64_t>(iv[i]);
    out.push_back(in[ravel(idx, self.shape())]);
  }
  return out;
}

TEST(Gather, EveryDTypeAndDim) {
  for (DType dt : test::all_dtypes()) {
    Tensor self = test::sample_tensor({3, 4, 5}, dt, 8);
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      for (DType it : {kInt64, kInt32}) {
        // Smaller than self in the other dims, longer than self along dim.
        Shape ishape{2, 3, 4};
        ishape[d] = 7;
        Tensor index = random_index(ishape, self.size(d), it, 9);
        Tensor out = self.gather(dim, index);
        EXPECT_EQ(out.shape(), ishape);
        EXPECT_EQ(out.dtype(), dt);
        EXPECT_EQ(values(out), gather_reference(self, d, index)) << dt << " dim " << dim;
      }
    }
  }
}

TEST(Gather, NonContiguousLargeAndScalar) {
  Tensor self = test::sample_tensor({200, 300}, kFloat32, 10).t();  // [300, 200]
  Tensor index = random_index({200, 300}, 300, kInt64, 11).t();     // [300, 200]
  EXPECT_EQ(values(self.gather(0, index)), gather_reference(self, 0, index));
  Tensor idx1 = random_index({250, 150}, 200, kInt32, 12);
  EXPECT_EQ(values(self.gather(1, idx1)), gather_reference(self, 1, idx1));
  Tensor expanded_index = test::make({1, 3}, kInt64, {2, 0, 1}).expand({4, 3});
  Tensor small = test::sample_tensor({4, 3}, kInt32, 13);
  EXPECT_EQ(values(small.gather(1, expanded_index)), gather_reference(small, 1, expanded_index));
  // 0-dim: as a 1-element 1-D tensor; the result has the index's shape.
  Tensor s = Tensor::full({}, 3, kInt8);
  Tensor g = s.gather(0, Tensor::zeros({}, kInt64));
  EXPECT_EQ(g.dim(), 0);
  EXPECT_EQ(values(g), (std::vector<double>{3}));
  EXPECT_EQ(values(s.gather(0, Tensor::zeros({3}, kInt64))), (std::vector<double>{3, 3, 3}));
  Tensor v = test::make({3}, kFloat64, {1, 2, 3});
  EXPECT_EQ(values(v.gather(0, Tensor::full({}, 2, kInt64))), (std::vector<double>{3}));
  EXPECT_EQ(self.gather(1, Tensor::empty({0, 5}, kInt64)).shape(), (Shape{0, 5}));
}

TEST(Gather, Errors) {
  Tensor self = test::sample_tensor({3, 4}, kFloat32, 14);
  THD_EXPECT_THROW_MSG(self.gather(1, test::make({3, 1}, kFloat64, {0, 1, 2})), TypeError,
                       "int64 or int32");
  THD_EXPECT_THROW_MSG(self.gather(1, test::make({3}, kInt64, {0, 1, 2})), ShapeError,
                       "same number of dimensions");
  THD_EXPECT_THROW_MSG(self.gather(1, Tensor::zeros({4, 1}, kInt64)), ShapeError, "dimension 0");
  THD_EXPECT_THROW_MSG(self.gather(1, test::make({2, 1}, kInt64, {0, 4})), IndexError,
                       "index 4 is out of bounds for dimension 1 with size 4");
  THD_EXPECT_THROW_MSG(self.gather(0, test::make({1, 2}, kInt64, {0, -1})), IndexError,
                       "index -1 is out of bounds for dimension 0 with size 3");
  THD_EXPECT_THROW_MSG(self.gather(-3, Tensor::zeros({1, 1}, kInt64)), IndexError, "out of range");
}

// ---- scatter ----------------------------------------------------------------------

// self with self[.., index[..], ..] = src[..] (or value) along dim.
std::vector<double> scatter_reference(const Tensor& self, int64_t dim, const Tensor& index,
                                      const Tensor* src, double value) {
  std::vector<double> out = values(self), iv = values(index);
  std::vector<double> sv = src ? values(*src) : std::vector<double>{};
  for (int64_t i = 0; i < index.numel(); ++i) {
    auto idx = unravel(i, index.shape());
    double v = src ? sv[ravel(idx, src->shape())] : value;
    idx[dim] = static_cast<int64_t>(iv[i]);
    out[ravel(idx, self.shape())] = v;
  }
  return out;
}

TEST(Scatter, EveryDTypeAndDim) {
  for (DType dt : test::all_dtypes()) {
    for (int64_t dim : {0, 1, 2, -1}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      for (DType it : {kInt64, kInt32}) {
        Tensor self = test::sample_tensor({4, 5, 6}, dt, 15);
        std::vector<double> before = values(self);
        Shape ishape{3, 4, 5};
        ishape[d] = 3;
        Tensor index = unique_index(ishape, d, self.size(d), it, 16);
        Tensor src = test::sample_tensor({4, 5, 6}, dt, 17);  // larger than index
        auto expected = scatter_reference(self, d, index, &src, 0);
        Tensor out = self.scatter(dim, index, src);
        EXPECT_EQ(values(out), expected) << dt << " dim " << dim;
        EXPECT_EQ(values(self), before) << "scatter must not modify self";
        EXPECT_EQ(&self.scatter_(dim, index, src), &self);
        EXPECT_EQ(values(self), expected) << dt << " dim " << dim;
        // The scalar form, converted to self's dtype.
        Tensor fresh = test::sample_tensor({4, 5, 6}, dt, 15);
        auto expected_v = scatter_reference(fresh, d, index, nullptr, test::round_to(dt, 1));
        EXPECT_EQ(values(fresh.scatter(dim, index, 1)), expected_v);
        fresh.scatter_(dim, index, Scalar(1));
        EXPECT_EQ(values(fresh), expected_v);
      }
    }
  }
}

TEST(Scatter, IntoTransposedAndFromStridedSrc) {
  Tensor base = test::sample_tensor({6, 5}, kFloat32, 18);
  Tensor self = base.t();  // [5, 6], non-contiguous
  Tensor index = unique_index({3, 6}, 0, 5, kInt64, 19).t().contiguous().t();  // [3, 6] strided
  Tensor src = test::sample_tensor({3, 12}, kFloat32, 20).slice(1, 0, 12, 2);  // [3, 6] step 2
  auto expected = scatter_reference(self, 0, index, &src, 0);
  self.scatter_(0, index, src);
  EXPECT_EQ(values(self), expected);
  EXPECT_EQ(values(base.t()), expected);  // written through to the base
}

TEST(Scatter, LargeAndZeroSize) {
  Tensor self = test::sample_tensor({300, 300}, kInt64, 21);
  Tensor index = unique_index({300, 200}, 1, 300, kInt64, 22);
  Tensor src = test::sample_tensor({300, 200}, kInt64, 23);
  auto expected = scatter_reference(self, 1, index, &src, 0);
  self.scatter_(1, index, src);
  EXPECT_EQ(values(self), expected);
  Tensor idx0 = unique_index({200, 300}, 0, 300, kInt32, 24);
  auto expected0 = scatter_reference(self, 0, idx0, nullptr, -5);
  EXPECT_EQ(values(self.scatter(0, idx0, -5)), expected0);
  // An empty index changes nothing and checks no shapes (as torch).
  Tensor small = test::sample_tensor({2, 3}, kFloat32, 25);
  EXPECT_EQ(values(small.scatter(0, Tensor::empty({0}, kInt64), small)), values(small));
  EXPECT_EQ(values(small.scatter(1, Tensor::empty({2, 0}, kInt64), 9)), values(small));
  Tensor empty = Tensor::empty({0, 3});
  EXPECT_EQ(empty.scatter(1, Tensor::empty({0, 3}, kInt64), 1.0).shape(), (Shape{0, 3}));
}

TEST(Scatter, ScalarSelf) {
  Tensor s = Tensor::full({}, 3.0, kFloat64);
  s.scatter_(0, Tensor::zeros({}, kInt64), Tensor::full({}, 5.0, kFloat64));
  EXPECT_EQ(values(s), (std::vector<double>{5}));
  s.scatter_(-1, Tensor::zeros({1}, kInt32), 7);
  EXPECT_EQ(values(s), (std::vector<double>{7}));
  Tensor v = test::make({3}, kInt32, {1, 2, 3});
  EXPECT_EQ(values(v.scatter(0, Tensor::full({}, 1, kInt64), Tensor::full({}, 9, kInt32))),
            (std::vector<double>{1, 9, 3}));
}

TEST(Scatter, DuplicateIndicesDoNotCrash) {
  Tensor self = Tensor::zeros({4, 3}, kFloat32);
  Tensor index = Tensor::zeros({4, 3}, kInt64);  // every write lands on row 0
  Tensor src = test::make({4, 3}, kFloat32, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  self.scatter_(0, index, src);
  std::vector<double> v = values(self);
  for (int64_t j = 0; j < 3; ++j) {
    // One of the values written to that column.
    bool found = false;
    for (int64_t i = 0; i < 4; ++i) found |= v[j] == static_cast<double>(i * 3 + j + 1);
    EXPECT_TRUE(found) << v[j];
  }
  for (int64_t i = 3; i < 12; ++i) EXPECT_EQ(v[i], 0);
  Tensor big = Tensor::zeros({10}, kInt32);
  big.scatter_(0, random_index({100000}, 10, kInt64, 26), 1);
  EXPECT_EQ(values(big), std::vector<double>(10, 1.0));
}

TEST(Scatter, AliasedSrcAndIndex) {
  // src is self: every value must be read before any is overwritten.
  Tensor self = test::make({4}, kInt64, {10, 20, 30, 40});
  Tensor index = test::make({4}, kInt64, {1, 2, 3, 0});
  Tensor copy = self.clone();
  auto expected = scatter_reference(self, 0, index, &copy, 0);
  self.scatter_(0, index, self);
  EXPECT_EQ(values(self), expected);
  // src overlaps self shifted by one.
  Tensor base = test::make({5}, kFloat32, {1, 2, 3, 4, 5});
  Tensor dst = base.slice(0, 0, 4), src = base.slice(0, 1, 5);
  Tensor src_copy = src.clone();
  auto expected2 = scatter_reference(dst, 0, index, &src_copy, 0);
  dst.scatter_(0, index, src);
  EXPECT_EQ(values(dst), expected2);
  // index is self.
  Tensor t = test::make({3}, kInt64, {2, 0, 1});
  Tensor t_copy = t.clone();
  auto expected3 = scatter_reference(t, 0, t_copy, nullptr, 5);
  t.scatter_(0, t, 5);
  EXPECT_EQ(values(t), expected3);
}

TEST(Scatter, ErrorsLeaveSelfUnchanged) {
  Tensor self = test::sample_tensor({3, 4}, kFloat32, 27);
  const std::vector<double> before = values(self);
  Tensor src = test::sample_tensor({3, 4}, kFloat32, 28);
  // The bad index comes last: nothing may have been written before it is found.
  Tensor bad = test::make({2, 4}, kInt64, {0, 1, 2, 0, 1, 2, 0, 3});
  THD_EXPECT_THROW_MSG(self.scatter_(0, bad, src), IndexError,
                       "index 3 is out of bounds for dimension 0 with size 3");
  THD_EXPECT_THROW_MSG(self.scatter_(0, test::make({1, 2}, kInt32, {0, -1}), 1.0), IndexError,
                       "index -1 is out of bounds for dimension 0 with size 3");
  THD_EXPECT_THROW_MSG(self.scatter_(1, test::make({1, 1}, kFloat32, {0}), src), TypeError,
                       "int64 or int32");
  THD_EXPECT_THROW_MSG(self.scatter_(1, Tensor::zeros({1, 1}, kInt64), src.to(kFloat64)), TypeError,
                       "src.dtype");
  THD_EXPECT_THROW_MSG(self.scatter_(1, Tensor::zeros({4}, kInt64), src), ShapeError,
                       "same number of dimensions as self");
  THD_EXPECT_THROW_MSG(self.scatter_(1, Tensor::zeros({2, 2}, kInt64), Tensor::zeros({2})),
                       ShapeError, "same number of dimensions as src");
  THD_EXPECT_THROW_MSG(self.scatter_(1, Tensor::zeros({4, 1}, kInt64), src), ShapeError,
                       "no larger than self");
  THD_EXPECT_THROW_MSG(self.scatter_(1, Tensor::zeros({2, 3}, kInt64), Tensor::zeros({2, 2})),
                       ShapeError, "no larger than src");
  THD_EXPECT_THROW_MSG(self.scatter_(2, Tensor::zeros({1, 1}, kInt64), src), IndexError,
                       "out of range");
  THD_EXPECT_THROW_MSG(self.scatter(0, bad, src), IndexError, "index 3");
  EXPECT_EQ(values(self), before);
  // Values that overflow the dtype are refused as torch does.
  Tensor i8 = Tensor::zeros({3}, kInt8);
  THD_EXPECT_THROW_MSG(i8.scatter_(0, Tensor::zeros({1}, kInt64), 300), ValueError,
                       "without overflow");
  EXPECT_EQ(values(i8), std::vector<double>(3, 0.0));
  // An expanded tensor has several elements per memory location.
  Tensor e = Tensor::zeros({1, 3}).expand({4, 3});
  THD_EXPECT_THROW_MSG(e.scatter_(0, Tensor::zeros({1, 3}, kInt64), 1.0), ValueError,
                       "single memory location");
}

// ---- masked_fill ------------------------------------------------------------------

TEST(MaskedFill, EveryDTypeWithBroadcastMask) {
  Tensor mask = test::make({4}, kBool, {1, 0, 0, 1});
  for (DType dt : test::all_dtypes()) {
    Tensor self = test::sample_tensor({3, 4}, dt, 29);
    std::vector<double> before = values(self), expected = before;
    const double fill = test::round_to(dt, 1);
    for (int64_t i = 0; i < 12; ++i) {
      if (i % 4 == 0 || i % 4 == 3) expected[i] = fill;
    }
    Tensor out = self.masked_fill(mask, 1);
    EXPECT_EQ(out.dtype(), dt);
    EXPECT_EQ(values(out), expected) << dt;
    EXPECT_EQ(values(self), before);
    EXPECT_EQ(&self.masked_fill_(mask, 1), &self);
    EXPECT_EQ(values(self), expected) << dt;
  }
}

TEST(MaskedFill, NonContiguousAndLarge) {
  Tensor base = test::sample_tensor({5, 6}, kFloat64, 30);
  Tensor self = base.t();  // [6, 5]
  Tensor mask = test::sample_tensor({5, 6}, kBool, 31).t();
  std::vector<double> expected = values(self), mv = values(mask);
  for (size_t i = 0; i < expected.size(); ++i) {
    if (mv[i] != 0) expected[i] = -2.5;
  }
  self.masked_fill_(mask, -2.5);
  EXPECT_EQ(values(base.t()), expected);
  Tensor big = test::sample_tensor({300, 400}, kBFloat16, 32);
  Tensor bmask = test::sample_tensor({400}, kBool, 33);
  std::vector<double> bexp = values(big), bm = values(bmask);
  for (int64_t i = 0; i < 300 * 400; ++i) {
    if (bm[i % 400] != 0) bexp[i] = 0.5;
  }
  EXPECT_EQ(values(big.masked_fill(bmask, 0.5)), bexp);
}

TEST(MaskedFill, ValueConversionAndScalars) {
  // A float value into an integer tensor truncates toward zero.
  Tensor t = Tensor::zeros({2}, kInt32);
  t.masked_fill_(test::make({2}, kBool, {1, 0}), 2.7);
  EXPECT_EQ(values(t), (std::vector<double>{2, 0}));
  t.masked_fill_(test::make({2}, kBool, {0, 1}), -2.7);
  EXPECT_EQ(values(t), (std::vector<double>{2, -2}));
  Tensor b = Tensor::zeros({2}, kBool);
  EXPECT_EQ(values(b.masked_fill(test::make({2}, kBool, {0, 1}), true)),
            (std::vector<double>{0, 1}));
  // Negative integers wrap into uint8 (two's complement), as torch allows.
  Tensor u = Tensor::zeros({1}, kUInt8);
  EXPECT_EQ(values(u.masked_fill(Tensor::ones({1}, kBool), -1)), (std::vector<double>{255}));
  // Infinities and NaN fit floating tensors.
  Tensor h = Tensor::zeros({1}, kFloat16);
  EXPECT_TRUE(std::isinf(values(h.masked_fill(Tensor::ones({1}, kBool), INFINITY))[0]));
  EXPECT_TRUE(std::isnan(values(h.masked_fill(Tensor::ones({1}, kBool), NAN))[0]));
  // 0-dim self and mask.
  Tensor s = Tensor::full({}, 4, kInt64);
  EXPECT_EQ(values(s.masked_fill(Tensor::ones({}, kBool), 9)), (std::vector<double>{9}));
  EXPECT_EQ(values(s.masked_fill(Tensor::zeros({}, kBool), 9)), (std::vector<double>{4}));
  // Out of place, self broadcasts to the mask too.
  Tensor row = test::make({3}, kFloat32, {1, 2, 3});
  Tensor m2 = test::make({2, 3}, kBool, {1, 0, 0, 0, 0, 1});
  Tensor o = row.masked_fill(m2, 0);
  EXPECT_EQ(o.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(o), (std::vector<double>{0, 2, 3, 1, 2, 0}));
  EXPECT_EQ(Tensor::empty({0, 3}).masked_fill(Tensor::ones({3}, kBool), 1).shape(), (Shape{0, 3}));
}

TEST(MaskedFill, Errors) {
  Tensor self = test::sample_tensor({2, 3}, kInt8, 34);
  const std::vector<double> before = values(self);
  THD_EXPECT_THROW_MSG(self.masked_fill_(Tensor::ones({2, 3}, kUInt8), 1), TypeError,
                       "boolean masks, but got mask with dtype uint8");
  THD_EXPECT_THROW_MSG(self.masked_fill_(Tensor::ones({2, 2}, kBool), 1), ShapeError,
                       "does not broadcast to self's shape [2, 3]");
  THD_EXPECT_THROW_MSG(self.masked_fill_(Tensor::ones({4, 2, 3}, kBool), 1), ShapeError,
                       "[4, 2, 3]");
  THD_EXPECT_THROW_MSG(self.masked_fill(Tensor::ones({2, 2}, kBool), 1), ShapeError,
                       "do not broadcast");
  THD_EXPECT_THROW_MSG(self.masked_fill_(Tensor::ones({2, 3}, kBool), 128), ValueError,
                       "value 128 cannot be converted to type int8 without overflow");
  THD_EXPECT_THROW_MSG(self.masked_fill_(Tensor::ones({2, 3}, kBool), 127.5), ValueError,
                       "without overflow");
  THD_EXPECT_THROW_MSG(self.masked_fill_(Tensor::ones({2, 3}, kBool), NAN), ValueError,
                       "without overflow");
  THD_EXPECT_THROW_MSG(Tensor::zeros({1}, kFloat16).masked_fill_(Tensor::ones({1}, kBool), 1e5),
                       ValueError, "float16");
  THD_EXPECT_THROW_MSG(self.masked_fill_(Tensor(), 1), ValueError, "undefined");
  EXPECT_EQ(values(self), before);
  Tensor e = Tensor::zeros({1, 3}).expand({2, 3});
  THD_EXPECT_THROW_MSG(e.masked_fill_(Tensor::ones({2, 3}, kBool), 1), ValueError,
                       "single memory location");
}

}  // namespace
}  // namespace thd
