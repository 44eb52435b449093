#include <gtest/gtest.h>
#include <thd/tensor.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "tensor/reference.h"

namespace thd {
namespace {

using test::values;

using test::numel_of;
using test::ravel;
using test::unravel;

// Does a come strictly before b? NaN ranks above every number.
bool before(double a, double b, bool descending) {
  const bool an = std::isnan(a), bn = std::isnan(b);
  if (an || bn) return descending ? an && !bn : bn && !an;
  return descending ? a > b : a < b;
}

struct Sorted {
  std::vector<double> values;
  std::vector<double> indices;
};

// Insertion sort of every line along dim: stable by construction. Keeps the first k
// of each line (all when k < 0).
Sorted sort_reference(const Tensor& t, int64_t dim, bool descending, int64_t k = -1) {
  const Shape& shape = t.shape();
  const int64_t n = shape[dim];
  if (k < 0) k = n;
  Shape out_shape = shape;
  out_shape[dim] = k;
  std::vector<double> in = values(t);
  Sorted r{std::vector<double>(static_cast<size_t>(numel_of(out_shape))),
           std::vector<double>(static_cast<size_t>(numel_of(out_shape)))};
  Shape outer = shape;
  outer[dim] = 1;
  for (int64_t o = 0; o < numel_of(outer); ++o) {
    auto idx = unravel(o, outer);
    std::vector<std::pair<double, int64_t>> line;
    for (int64_t j = 0; j < n; ++j) {
      idx[dim] = j;
      std::pair<double, int64_t> item{in[ravel(idx, shape)], j};
      size_t pos = line.size();
      while (pos > 0 && before(item.first, line[pos - 1].first, descending)) --pos;
      line.insert(line.begin() + static_cast<int64_t>(pos), item);
    }
    for (int64_t j = 0; j < k; ++j) {
      idx[dim] = j;
      r.values[ravel(idx, out_shape)] = line[j].first;
      r.indices[ravel(idx, out_shape)] = static_cast<double>(line[j].second);
    }
  }
  return r;
}

// Equality that treats NaN as equal to NaN.
::testing::AssertionResult same(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", expected " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

void expect_sort(const Tensor& t, int64_t dim, bool descending) {
  const int64_t d = t.dim() == 0 ? 0 : (dim < 0 ? dim + t.dim() : dim);
  auto [v, i] = t.sort(dim, descending);
  EXPECT_EQ(v.shape(), t.shape());
  EXPECT_EQ(i.shape(), t.shape());
  EXPECT_EQ(v.dtype(), t.dtype());
  EXPECT_EQ(i.dtype(), kInt64);
  Sorted want = sort_reference(t, d, descending);
  EXPECT_TRUE(same(values(v), want.values))
      << t.dtype() << " dim " << dim << " desc " << descending;
  EXPECT_TRUE(same(values(i), want.indices))
      << t.dtype() << " dim " << dim << " desc " << descending;
}

// ---- sort -------------------------------------------------------------------------

TEST(Sort, EveryDTypeDimAndDirectionWithTies) {
  // sample data repeats values a lot, so the indices check stability too.
  for (DType dt : test::all_dtypes()) {
    Tensor t = test::sample_tensor({4, 9, 5}, dt, 1);
    for (int64_t dim : {0, 1, 2, -1, -2}) {
      for (bool desc : {false, true}) expect_sort(t, dim, desc);
    }
  }
}

TEST(Sort, DefaultsToLastDimAscending) {
  Tensor t = test::make({2, 3}, kInt32, {3, 1, 2, 0, 0, -1});
  auto [v, i] = t.sort();
  EXPECT_EQ(values(v), (std::vector<double>{1, 2, 3, -1, 0, 0}));
  EXPECT_EQ(values(i), (std::vector<double>{1, 2, 0, 2, 0, 1}));
  auto [vd, id] = t.sort(-1, true);
  EXPECT_EQ(values(vd), (std::vector<double>{3, 2, 1, 0, 0, -1}));
  EXPECT_EQ(values(id), (std::vector<double>{0, 2, 1, 0, 1, 2}));  // ties keep input order
}

TEST(Sort, NaNIsLargest) {
  for (DType dt : test::float_dtypes()) {
    Tensor t =
        test::make({2, 6}, dt, {NAN, 1, -INFINITY, NAN, INFINITY, -0.5, 2, NAN, 2, -1, NAN, NAN});
    auto [v, i] = t.sort(1);
    EXPECT_TRUE(same(values(v), {-INFINITY, -0.5, 1, INFINITY, NAN, NAN, -1, 2, 2, NAN, NAN, NAN}))
        << dt;
    EXPECT_EQ(values(i), (std::vector<double>{2, 5, 1, 4, 0, 3, 3, 0, 2, 1, 4, 5})) << dt;
    auto [vd, id] = t.sort(1, true);
    EXPECT_TRUE(same(values(vd), {NAN, NAN, INFINITY, 1, -0.5, -INFINITY, NAN, NAN, NAN, 2, 2, -1}))
        << dt;
    EXPECT_EQ(values(id), (std::vector<double>{0, 3, 4, 1, 5, 2, 1, 4, 5, 0, 2, 3})) << dt;
    for (int64_t dim : {0, 1}) {
      for (bool desc : {false, true}) expect_sort(t, dim, desc);
    }
  }
}

TEST(Sort, NonContiguousInputs) {
  Tensor base = test::sample_tensor({7, 8}, kFloat32, 2);
  expect_sort(base.t(), -1, false);
  expect_sort(base.t(), 0, true);
  expect_sort(base.slice(1, 0, 8, 3), 1, false);
  expect_sort(test::sample_tensor({3, 1}, kInt64, 3).expand({3, 5}), 0, true);
  expect_sort(test::sample_tensor({2, 3, 4}, kBFloat16, 4).permute({2, 0, 1}), 1, false);
}

TEST(Sort, LargeRowsAndManyRows) {
  // Many short rows (the threaded path) and one long row.
  Tensor many = test::sample_tensor({3000, 40}, kFloat64, 5);
  expect_sort(many, -1, false);
  expect_sort(many, 0, true);
  Tensor halves = test::sample_tensor({2000, 30}, kFloat16, 6);
  expect_sort(halves, 1, true);
  Tensor longrow = test::sample_tensor({20000}, kInt32, 7);
  auto [v, i] = longrow.sort();
  std::vector<double> in = values(longrow), vv = values(v), iv = values(i);
  for (size_t j = 0; j < vv.size(); ++j) {
    ASSERT_EQ(vv[j], in[static_cast<size_t>(iv[j])]);
    if (j > 0) {
      ASSERT_LE(vv[j - 1], vv[j]);
      if (vv[j - 1] == vv[j]) {
        ASSERT_LT(iv[j - 1], iv[j]) << "not stable at " << j;
      }
    }
  }
}

TEST(Sort, ZeroSizeAndScalars) {
  auto [v, i] = Tensor::empty({0, 3}).sort(1);
  EXPECT_EQ(v.shape(), (Shape{0, 3}));
  EXPECT_EQ(i.shape(), (Shape{0, 3}));
  EXPECT_EQ(Tensor::empty({3, 0}, kInt8).sort(1).first.shape(), (Shape{3, 0}));
  EXPECT_EQ(Tensor::empty({3, 0}, kInt8).sort(0, true).second.shape(), (Shape{3, 0}));
  Tensor s = Tensor::full({}, 2.5, kFloat64);
  auto [sv, si] = s.sort(0);
  EXPECT_EQ(sv.dim(), 0);
  EXPECT_EQ(values(sv), (std::vector<double>{2.5}));
  EXPECT_EQ(values(si), (std::vector<double>{0}));
  EXPECT_FALSE(sv.shares_storage(s));
  expect_sort(test::make({1}, kBool, {1}), 0, true);
}

TEST(Sort, Errors) {
  Tensor t = Tensor::zeros({2, 3});
  THD_EXPECT_THROW_MSG(t.sort(2), IndexError, "out of range");
  THD_EXPECT_THROW_MSG(t.sort(-3), IndexError, "out of range");
  THD_EXPECT_THROW_MSG(Tensor::zeros({}).sort(1), IndexError, "out of range");
  THD_EXPECT_THROW_MSG(Tensor().sort(), ValueError, "undefined");
}

// ---- topk -------------------------------------------------------------------------

// topk(sorted) is the first k of a stable sort in the matching direction: ties go to
// the lower position.
TEST(TopK, EveryDTypeAndK) {
  for (DType dt : test::numeric_dtypes()) {
    Tensor t = test::sample_tensor({5, 11}, dt, 8);
    for (int64_t dim : {0, 1, -1}) {
      const int64_t d = dim < 0 ? dim + 2 : dim;
      for (int64_t k = 0; k <= t.size(d); ++k) {
        for (bool largest : {true, false}) {
          auto [v, i] = t.topk(k, dim, largest, true);
          Shape want_shape = t.shape();
          want_shape[d] = k;
          EXPECT_EQ(v.shape(), want_shape);
          EXPECT_EQ(i.dtype(), kInt64);
          EXPECT_EQ(v.dtype(), dt);
          Sorted want = sort_reference(t, d, largest, k);
          EXPECT_TRUE(same(values(v), want.values)) << dt << " k " << k << " largest " << largest;
          EXPECT_TRUE(same(values(i), want.indices)) << dt << " k " << k << " largest " << largest;
        }
      }
    }
  }
}

TEST(TopK, UnsortedHoldsTheSameElements) {
  Tensor t = test::sample_tensor({6, 50}, kFloat32, 9);
  std::vector<double> in = values(t);
  for (bool largest : {true, false}) {
    auto [v, i] = t.topk(7, 1, largest, false);
    Sorted want = sort_reference(t, 1, largest, 7);
    std::vector<double> vv = values(v), iv = values(i);
    for (int64_t r = 0; r < 6; ++r) {
      std::multiset<double> got_vals, want_vals;
      for (int64_t j = 0; j < 7; ++j) {
        // Every index points at its value in its row.
        EXPECT_EQ(vv[r * 7 + j], in[r * 50 + static_cast<int64_t>(iv[r * 7 + j])]);
        got_vals.insert(vv[r * 7 + j]);
        want_vals.insert(want.values[r * 7 + j]);
      }
      EXPECT_EQ(got_vals, want_vals);
    }
  }
}

TEST(TopK, NaNNonContiguousLargeAndScalars) {
  Tensor n = test::make({6}, kFloat32, {1, NAN, 3, NAN, -1, 2});
  auto [v, i] = n.topk(3);
  EXPECT_TRUE(same(values(v), {NAN, NAN, 3}));
  EXPECT_EQ(values(i), (std::vector<double>{1, 3, 2}));
  auto [vs, is] = n.topk(3, 0, false);
  EXPECT_EQ(values(vs), (std::vector<double>{-1, 1, 2}));
  EXPECT_EQ(values(is), (std::vector<double>{4, 0, 5}));
  Tensor base = test::sample_tensor({30, 20}, kInt64, 10);
  Tensor tr = base.t();  // [20, 30]
  auto [tv, ti] = tr.topk(4, 0);
  Sorted want = sort_reference(tr, 0, true, 4);
  EXPECT_EQ(values(tv), want.values);
  EXPECT_EQ(values(ti), want.indices);
  Tensor big = test::sample_tensor({4000, 25}, kFloat16, 11);
  auto [bv, bi] = big.topk(5, 1, false);
  Sorted bwant = sort_reference(big, 1, false, 5);
  EXPECT_EQ(values(bv), bwant.values);
  EXPECT_EQ(values(bi), bwant.indices);
  Tensor s = Tensor::full({}, 4, kInt32);
  auto [sv, si] = s.topk(1);
  EXPECT_EQ(sv.dim(), 0);
  EXPECT_EQ(values(sv), (std::vector<double>{4}));
  EXPECT_EQ(values(si), (std::vector<double>{0}));
  EXPECT_EQ(s.topk(0).first.numel(), 0);
  EXPECT_EQ(Tensor::empty({0, 4}).topk(2).first.shape(), (Shape{0, 2}));
  EXPECT_EQ(Tensor::empty({3, 0}).topk(0).second.shape(), (Shape{3, 0}));
}

TEST(TopK, Errors) {
  Tensor t = Tensor::zeros({2, 3});
  THD_EXPECT_THROW_MSG(t.topk(4), IndexError, "selected index k out of range");
  THD_EXPECT_THROW_MSG(t.topk(3, 0), IndexError, "selected index k out of range");
  THD_EXPECT_THROW_MSG(t.topk(-1), IndexError, "selected index k out of range");
  THD_EXPECT_THROW_MSG(Tensor::zeros({}).topk(2), IndexError, "selected index k out of range");
  THD_EXPECT_THROW_MSG(t.topk(1, 2), IndexError, "out of range");
  THD_EXPECT_THROW_MSG(Tensor::zeros({3}, kBool).topk(1), TypeError, "bool");
  THD_EXPECT_THROW_MSG(Tensor().topk(1), ValueError, "undefined");
}

}  // namespace
}  // namespace thd
