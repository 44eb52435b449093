#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <thd/tensor.h>

#include "tensor/reference.h"

namespace thd {
namespace {

using test::close;
using test::values;

class CopyBetween : public ::testing::TestWithParam<std::tuple<DType, DType>> {};

TEST_P(CopyBetween, ConvertsEveryPair) {
  auto [from, to] = GetParam();
  Tensor src = test::sample_tensor({3, 4}, from, 41, /*positive=*/to == kUInt8 || from == kUInt8);
  Tensor dst = Tensor::empty({3, 4}, to);
  dst.copy_(src);
  std::vector<double> want;
  for (double v : values(src)) {
    if (to == kBool) want.push_back(v != 0 ? 1 : 0);
    else if (!is_floating_point(to)) want.push_back(std::trunc(v));
    else want.push_back(test::round_to(to, v));
  }
  EXPECT_EQ(values(dst), want);
  EXPECT_EQ(values(src.to(to)), want);
}

INSTANTIATE_TEST_SUITE_P(AllPairs, CopyBetween,
                         ::testing::Combine(::testing::ValuesIn(test::all_dtypes()),
                                            ::testing::ValuesIn(test::all_dtypes())),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_to_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

TEST(Copy, BroadcastsIntoStridedDestination) {
  Tensor dst = Tensor::zeros({4, 3}, kFloat64);
  Tensor src = test::make({3}, kInt32, {1, 2, 3});
  dst.t().slice(1, 0, 4, 2).copy_(test::make({3, 1}, kFloat32, {7, 8, 9}));
  std::vector<double> v = values(dst);
  EXPECT_EQ(v, (std::vector<double>{7, 8, 9, 0, 0, 0, 7, 8, 9, 0, 0, 0}));
  dst.copy_(src);
  EXPECT_EQ(values(dst.select(0, 3)), (std::vector<double>{1, 2, 3}));
  THD_EXPECT_THROW_MSG(src.copy_(dst), ShapeError, "does not broadcast");
  THD_EXPECT_THROW_MSG(Tensor::zeros({1}).expand({3}).copy_(Tensor::ones({3})), ValueError,
                       "single memory location");
}

TEST(Copy, OverlappingSourceAndDestination) {
  Tensor a = test::make({5}, kInt64, {1, 2, 3, 4, 5});
  a.slice(0, 1, 5).copy_(a.slice(0, 0, 4));  // memmove semantics
  EXPECT_EQ(values(a), (std::vector<double>{1, 1, 2, 3, 4}));
  Tensor m = test::make({2, 2}, kFloat32, {1, 2, 3, 4});
  m.copy_(m.t());
  EXPECT_EQ(values(m), (std::vector<double>{1, 3, 2, 4}));
}

TEST(Copy, FloatToIntSaturatesInsteadOfUndefinedBehaviour) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor f = test::make({4}, kFloat64, {1e30, -1e30, std::nan(""), -inf});
  std::vector<int32_t> i = f.to(kInt32).to_vector<int32_t>();
  EXPECT_EQ(i[0], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(i[1], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(i[2], 0);
  EXPECT_EQ(i[3], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(test::make({1}, kFloat32, {300}).to(kUInt8).to_vector<uint8_t>()[0], 255);
}

TEST(Copy, ToSameDTypeSharesUnlessAskedToCopy) {
  Tensor a = Tensor::ones({3});
  EXPECT_TRUE(a.to(kFloat32).shares_storage(a));
  EXPECT_FALSE(a.to(kFloat32, /*copy=*/true).shares_storage(a));
  Tensor big = Tensor::arange(1 << 20, kFloat32);
  Tensor c = big.clone();
  EXPECT_EQ(values(c), values(big));
  Tensor h = big.to(kFloat64).to(kBFloat16);
  EXPECT_EQ(h.dtype(), kBFloat16);
  EXPECT_EQ(values(h)[255], 255.0);
}

TEST(Copy, ItemAndToVector) {
  Tensor t = test::make({2, 2}, kFloat16, {1.5, 2, 3, 4});
  EXPECT_EQ(t.select(0, 0).select(0, 0).item<double>(), 1.5);
  EXPECT_TRUE(t.slice(0, 0, 1).slice(1, 0, 1).item().is_floating_point());
  THD_EXPECT_THROW_MSG(t.item(), ValueError, "4 elements");
  EXPECT_EQ(t.t().to_vector<float>(), (std::vector<float>{1.5, 3, 2, 4}));
  THD_EXPECT_THROW_MSG(t.data<float>(), TypeError, "expected a tensor of dtype float32, got float16");
}

}  // namespace
}  // namespace thd
