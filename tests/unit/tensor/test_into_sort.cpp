// sort and topk written into existing tensors (tensor/into_sort.h): the allocating
// op's bytes, values and indices; both untouched and false when either cannot be a
// result; the op's error, with both untouched, for arguments the op refuses.
#include <gtest/gtest.h>

#include <limits>

#include <thd/error.h>
#include <thd/tensor.h>

#include "expect_throw.h"
#include "into_testing.h"
#include "tensor/into_sort.h"

namespace thd {
namespace {

using into_testing::same_bytes;
using into_testing::sample;

// Both results written, with the op's bytes.
::testing::AssertionResult writes_pair(const std::function<bool(const Tensor&, const Tensor&)>& op_into,
                                       const std::pair<Tensor, Tensor>& expected) {
  Tensor values = Tensor::full(expected.first.shape(), 7, expected.first.dtype());
  Tensor indices = Tensor::full(expected.second.shape(), 7, kInt64);
  if (!op_into(values, indices)) return ::testing::AssertionFailure() << "did not write";
  if (!same_bytes(values, expected.first)) return ::testing::AssertionFailure() << "wrote other values";
  if (!same_bytes(indices, expected.second)) return ::testing::AssertionFailure() << "wrote other indices";
  return ::testing::AssertionSuccess();
}

TEST(IntoSort, SortAndTopkWriteWhatTheOpMakes) {
  for (DType dt : {kFloat32, kFloat64, kInt64, kInt32, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = sample({4, 5, 6}, dt);
    if (is_floating_point(dt)) a.select(1, 2).select(0, 1).fill_(std::numeric_limits<double>::quiet_NaN());
    const Tensor strided = a.transpose(0, 2);
    for (const Tensor& x : {a, strided}) {
      for (int64_t dim : {0, 1, -1}) {
        for (bool flag : {false, true}) {
          SCOPED_TRACE(dim * 2 + flag);
          EXPECT_TRUE(writes_pair([&](const Tensor& v, const Tensor& i) { return detail::sort_into(v, i, x, dim, flag); },
                                  x.sort(dim, flag)));
          EXPECT_TRUE(writes_pair(
              [&](const Tensor& v, const Tensor& i) { return detail::topk_into(v, i, x, 3, dim, flag, true); },
              x.topk(3, dim, flag, true)));
          EXPECT_TRUE(writes_pair(
              [&](const Tensor& v, const Tensor& i) { return detail::topk_into(v, i, x, 2, dim, !flag, false); },
              x.topk(2, dim, !flag, false)));
        }
      }
    }
  }
  const Tensor s = Tensor::full({}, 4.5, kFloat32);
  EXPECT_TRUE(writes_pair([&](const Tensor& v, const Tensor& i) { return detail::sort_into(v, i, s, 0, false); },
                          s.sort(0, false)));
  const Tensor bools = sample({9}, kBool);
  EXPECT_TRUE(writes_pair([&](const Tensor& v, const Tensor& i) { return detail::sort_into(v, i, bools, 0, true); },
                          bools.sort(0, true)));
}

TEST(IntoSort, OutputsThatCannotBeTheResultsAreRefusedAndLeftAsTheyWere) {
  const Tensor a = sample({4, 5}, kFloat32);
  auto refuses = [&](const std::function<bool(const Tensor&, const Tensor&)>& op_into, const Tensor& v,
                     const Tensor& i) {
    const Tensor v0 = v.clone(), i0 = i.clone();
    return !op_into(v, i) && same_bytes(v, v0) && same_bytes(i, i0);
  };
  auto sort1 = [&](const Tensor& v, const Tensor& i) { return detail::sort_into(v, i, a, 1, false); };
  auto top2 = [&](const Tensor& v, const Tensor& i) { return detail::topk_into(v, i, a, 2, 1, true, true); };
  const Tensor v = Tensor::zeros({4, 5}, kFloat32), i = Tensor::zeros({4, 5}, kInt64);
  EXPECT_TRUE(refuses(sort1, Tensor::zeros({4, 5}, kFloat64), i));
  EXPECT_TRUE(refuses(sort1, v, Tensor::zeros({4, 5}, kInt32)));
  EXPECT_TRUE(refuses(sort1, Tensor::zeros({5, 4}, kFloat32).t(), i));
  EXPECT_TRUE(refuses(sort1, v, Tensor::zeros({20}, kInt64)));
  EXPECT_TRUE(refuses(top2, v, i));  // the full sort's shape, not topk's
  Tensor alias = a.clone();
  EXPECT_TRUE(refuses([&](const Tensor& vv, const Tensor& ii) { return detail::sort_into(vv, ii, alias, 1, false); },
                      alias, i));
  // values and indices in one storage.
  Tensor both = Tensor::zeros({2, 4, 5}, kInt64);
  const Tensor ints = a.to(kInt64);
  EXPECT_TRUE(refuses([&](const Tensor& vv, const Tensor& ii) { return detail::sort_into(vv, ii, ints, 1, false); },
                      both.select(0, 0), both.select(0, 1)));
  // A 0-dim input of topk: the op's clone.
  const Tensor s = Tensor::full({}, 1.0, kFloat32);
  EXPECT_TRUE(refuses([&](const Tensor& vv, const Tensor& ii) { return detail::topk_into(vv, ii, s, 1, 0, true, true); },
                      Tensor::zeros({}, kFloat32), Tensor::zeros({}, kInt64)));
}

TEST(IntoSort, ArgumentsTheOpRefusesRaiseItsErrorAndLeaveTheOutputsAsTheyWere) {
  const Tensor a = sample({4, 5}, kFloat32);
  Tensor v = Tensor::full({4, 2}, 7, kFloat32), i = Tensor::full({4, 2}, 7, kInt64);
  const Tensor v0 = v.clone(), i0 = i.clone();
  THD_EXPECT_THROW_MSG(detail::topk_into(v, i, a, 6, 1, true, true), IndexError,
                       "selected index k out of range: k = 6 but dimension 1 has size 5");
  THD_EXPECT_THROW_MSG(detail::topk_into(v, i, a, 2, 2, true, true), IndexError, "dim 2 is out of range");
  THD_EXPECT_THROW_MSG(detail::topk_into(v, i, sample({4, 5}, kBool), 2, 1, true, true), TypeError,
                       "topk does not support dtype");
  THD_EXPECT_THROW_MSG(detail::sort_into(v, i, a, -3, false), IndexError, "dim -3 is out of range");
  EXPECT_TRUE(same_bytes(v, v0));
  EXPECT_TRUE(same_bytes(i, i0));
}

}  // namespace
}  // namespace thd
