#include <gtest/gtest.h>

#include <thd/tensor.h>

#include "tensor/reference.h"

namespace thd {
namespace {

using test::values;

std::vector<double> iota(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
  return v;
}

TEST(Views, ViewSharesStorage) {
  Tensor a = test::make({2, 3}, kFloat32, iota(6));
  Tensor v = a.view({3, 2});
  EXPECT_TRUE(v.shares_storage(a));
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  EXPECT_EQ(values(v), iota(6));
  v.fill_(7);
  EXPECT_EQ(values(a), std::vector<double>(6, 7.0));
  EXPECT_EQ(a.view({-1}).shape(), (Shape{6}));
  EXPECT_EQ(a.view({3, -1}).shape(), (Shape{3, 2}));
}

TEST(Views, ViewRejectsIncompatibleStrides) {
  Tensor a = test::make({2, 3}, kFloat32, iota(6)).t();
  THD_EXPECT_THROW_MSG(a.view({6}), ShapeError, "reshape");
  Tensor r = a.reshape({6});
  EXPECT_FALSE(r.shares_storage(a));
  EXPECT_EQ(values(r), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  THD_EXPECT_THROW_MSG(test::make({2, 3}, kFloat32, iota(6)).view({4, 2}), ShapeError, "invalid for input of size 6");
  THD_EXPECT_THROW_MSG(test::make({2, 3}, kFloat32, iota(6)).view({-1, -1}), ShapeError, "only one dim");
}

TEST(Views, ReshapeOfContiguousIsAView) {
  Tensor a = test::make({4, 3}, kInt64, iota(12));
  Tensor r = a.reshape({2, 2, 3});
  EXPECT_TRUE(r.shares_storage(a));
  EXPECT_EQ(values(r), iota(12));
  // A slice along the outer dim stays viewable.
  Tensor s = a.slice(0, 1, 3).reshape({6});
  EXPECT_TRUE(s.shares_storage(a));
  EXPECT_EQ(values(s), (std::vector<double>{3, 4, 5, 6, 7, 8}));
}

TEST(Views, TransposePermute) {
  Tensor a = test::make({2, 3, 4}, kFloat64, iota(24));
  Tensor p = a.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_TRUE(p.contiguous().is_contiguous());
  std::vector<double> v = values(p);
  EXPECT_EQ(v[0], 0);
  EXPECT_EQ(v[1], 4);   // p[0][0][1] = a[0][1][0]
  EXPECT_EQ(v[6], 1);   // p[1][0][0] = a[0][0][1]
  Tensor t = a.transpose(0, -1);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(values(t.transpose(0, 2)), iota(24));
  THD_EXPECT_THROW_MSG(a.permute({0, 1}), ShapeError, "number of dims");
  THD_EXPECT_THROW_MSG(a.permute({0, 1, 1}), IndexError, "repeats");
  THD_EXPECT_THROW_MSG(a.transpose(0, 3), IndexError, "out of range");
  THD_EXPECT_THROW_MSG(a.t(), ShapeError, "<= 2 dims");
}

TEST(Views, SliceNarrowSelect) {
  Tensor a = test::make({4, 5}, kInt32, iota(20));
  Tensor s = a.slice(1, 1, 5, 2);
  EXPECT_EQ(s.shape(), (Shape{4, 2}));
  EXPECT_EQ(values(s), (std::vector<double>{1, 3, 6, 8, 11, 13, 16, 18}));
  EXPECT_EQ(values(a.slice(0, -1, 100)), (std::vector<double>{15, 16, 17, 18, 19}));
  EXPECT_EQ(a.slice(0, 3, 1).shape(), (Shape{0, 5}));
  EXPECT_EQ(values(a.narrow(1, 2, 2).select(0, 1)), (std::vector<double>{7, 8}));
  EXPECT_EQ(values(a.select(1, -1)), (std::vector<double>{4, 9, 14, 19}));
  THD_EXPECT_THROW_MSG(a.select(0, 4), IndexError, "index 4 is out of range");
  THD_EXPECT_THROW_MSG(a.narrow(1, 4, 2), IndexError, "exceeds");
  THD_EXPECT_THROW_MSG(a.slice(0, 0, 2, 0), ValueError, "step");
  // Writes through a view land in the base.
  a.select(0, 0).fill_(-1);
  EXPECT_EQ(values(a.slice(0, 0, 1)), std::vector<double>(5, -1.0));
}

TEST(Views, ExpandSqueezeUnsqueeze) {
  Tensor a = test::make({3, 1}, kFloat32, {1, 2, 3});
  Tensor e = a.expand({2, 3, 4});
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_TRUE(e.shares_storage(a));
  EXPECT_EQ(values(e)[4], 2.0);
  EXPECT_EQ(a.expand({-1, 2}).shape(), (Shape{3, 2}));
  THD_EXPECT_THROW_MSG(a.expand({2, 2}), ShapeError, "must match the existing size");
  THD_EXPECT_THROW_MSG(e.fill_(0), ValueError, "single memory location");
  EXPECT_EQ(a.squeeze().shape(), (Shape{3}));
  EXPECT_EQ(a.squeeze(0).shape(), (Shape{3, 1}));
  EXPECT_EQ(a.squeeze(-1).shape(), (Shape{3}));
  EXPECT_EQ(a.unsqueeze(0).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(a.unsqueeze(-1).shape(), (Shape{3, 1, 1}));
  EXPECT_EQ(a.unsqueeze(2).shape(), (Shape{3, 1, 1}));
  THD_EXPECT_THROW_MSG(a.unsqueeze(3), IndexError, "out of range");
  Tensor s = Tensor::full({}, 5, kInt64);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.unsqueeze(0).shape(), (Shape{1}));
  EXPECT_EQ(s.item<int64_t>(), 5);
}

TEST(Views, SplitAndChunk) {
  Tensor a = test::make({7, 2}, kFloat32, iota(14));
  auto parts = a.split(3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].shape(), (Shape{1, 2}));
  EXPECT_TRUE(parts[1].shares_storage(a));
  EXPECT_EQ(values(parts[1]), (std::vector<double>{6, 7, 8, 9, 10, 11}));
  auto sized = a.split(std::vector<int64_t>{2, 5});
  EXPECT_EQ(sized[1].shape(), (Shape{5, 2}));
  THD_EXPECT_THROW_MSG(a.split(std::vector<int64_t>{2, 2}), ShapeError, "sum to 4");
  auto ch = a.chunk(3, 0);
  ASSERT_EQ(ch.size(), 3u);
  EXPECT_EQ(ch[0].size(0), 3);
  EXPECT_EQ(ch[2].size(0), 1);
  EXPECT_EQ(a.chunk(2, 1).size(), 2u);
}

TEST(Views, FlattenAndClone) {
  Tensor a = test::make({2, 3, 4}, kInt8, iota(24));
  EXPECT_EQ(a.flatten().shape(), (Shape{24}));
  EXPECT_EQ(a.flatten(1).shape(), (Shape{2, 12}));
  Tensor c = a.clone();
  EXPECT_FALSE(c.shares_storage(a));
  c.fill_(0);
  EXPECT_EQ(values(a), iota(24));
}

TEST(Views, ZeroSizeDims) {
  Tensor a = Tensor::empty({0, 3});
  EXPECT_EQ(a.numel(), 0);
  EXPECT_EQ(a.view({3, 0}).shape(), (Shape{3, 0}));
  EXPECT_EQ(a.reshape({-1, 3}).shape(), (Shape{0, 3}));
  EXPECT_EQ(a.t().shape(), (Shape{3, 0}));
  EXPECT_EQ(a.contiguous().numel(), 0);
  THD_EXPECT_THROW_MSG(a.view({-1, 0}), ShapeError, "invalid for input of size 0");
}

TEST(Views, UndefinedTensorThrows) {
  Tensor u;
  EXPECT_FALSE(u.defined());
  THD_EXPECT_THROW_MSG(u.view({1}), ValueError, "undefined");
  THD_EXPECT_THROW_MSG(u.clone(), ValueError, "undefined");
}

}  // namespace
}  // namespace thd
