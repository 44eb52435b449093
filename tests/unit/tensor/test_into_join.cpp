// cat and stack written into an existing tensor (tensor/into_join.h): the
// allocating op's bytes; `out` untouched and false when it cannot be the result;
// the op's error, with `out` untouched, for inputs the op refuses.
#include <gtest/gtest.h>

#include <vector>

#include <thd/error.h>
#include <thd/tensor.h>

#include "expect_throw.h"
#include "into_testing.h"
#include "tensor/into_join.h"

namespace thd {
namespace {

using detail::IntoJoin;
using into_testing::refuses;
using into_testing::same_bytes;
using into_testing::sample;
using into_testing::writes;

TEST(IntoJoin, CatAndStackWriteWhatTheOpMakes) {
  for (DType dt : {kFloat32, kInt64, kBool, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample({3, 4}, dt), b = sample({2, 4}, dt, 1.0), c = sample({4, 3}, dt, 2.0).t();
    const std::vector<Tensor> rows = {a, b, a};
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::join_into(IntoJoin::Cat, o, rows, 0); }, cat(rows, 0)));
    const std::vector<Tensor> cols = {a, c, a.slice(1, 0, 4, 2)};
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::join_into(IntoJoin::Cat, o, cols, -1); }, cat(cols, -1)));
    const std::vector<Tensor> same = {a, c, a};
    for (int64_t dim : {0, 1, 2, -1}) {
      SCOPED_TRACE(dim);
      EXPECT_TRUE(
          writes([&](const Tensor& o) { return detail::join_into(IntoJoin::Stack, o, same, dim); }, stack(same, dim)));
    }
  }
  // Mixed dtypes promote; a 1-D empty tensor joins anything.
  const std::vector<Tensor> mixed = {sample({2, 3}, kInt32), sample({1, 3}, kFloat64), Tensor::empty({0}, kInt64)};
  EXPECT_TRUE(writes([&](const Tensor& o) { return detail::join_into(IntoJoin::Cat, o, mixed, 0); }, cat(mixed, 0)));
  // Many small pieces: the copies run on several threads.
  std::vector<Tensor> many;
  for (int i = 0; i < 300; ++i) many.push_back(sample({1, 50}, kFloat32, i));
  EXPECT_TRUE(writes([&](const Tensor& o) { return detail::join_into(IntoJoin::Cat, o, many, 0); }, cat(many, 0)));
  EXPECT_TRUE(writes([&](const Tensor& o) { return detail::join_into(IntoJoin::Stack, o, many, 1); }, stack(many, 1)));
}

TEST(IntoJoin, AnOutputThatCannotBeTheResultIsRefusedAndLeftAsItWas) {
  const Tensor a = sample({3, 4}, kFloat32), b = sample({2, 4}, kFloat32, 1.0);
  const std::vector<Tensor> ab = {a, b};
  auto cat0 = [&](const Tensor& o) { return detail::join_into(IntoJoin::Cat, o, ab, 0); };
  EXPECT_TRUE(refuses(cat0, Tensor::zeros({4, 5}, kFloat32)));
  EXPECT_TRUE(refuses(cat0, Tensor::zeros({20}, kFloat32)));
  EXPECT_TRUE(refuses(cat0, Tensor::zeros({5, 4}, kFloat64)));
  EXPECT_TRUE(refuses(cat0, Tensor::zeros({4, 5}, kFloat32).t()));
  const std::vector<Tensor> aa = {a, a};
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::join_into(IntoJoin::Stack, o, aa, 0); },
                      Tensor::zeros({6, 4}, kFloat32)));
  // Storage shared with an input.
  Tensor alias = Tensor::zeros({6, 4}, kFloat32);
  const std::vector<Tensor> with_alias = {alias.narrow(0, 0, 3), a};
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::join_into(IntoJoin::Cat, o, with_alias, 0); }, alias));
  // Only 1-D empty tensors: an empty result.
  const std::vector<Tensor> empties = {Tensor::empty({0}, kFloat32)};
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::join_into(IntoJoin::Cat, o, empties, 0); },
                      Tensor::zeros({1}, kFloat32)));
}

TEST(IntoJoin, InputsTheOpRefusesRaiseItsErrorAndLeaveTheOutputAsItWas) {
  const Tensor a = sample({3, 4}, kFloat32);
  Tensor out = Tensor::full({6, 4}, 7, kFloat32);
  const Tensor before = out.clone();
  THD_EXPECT_THROW_MSG(detail::join_into(IntoJoin::Cat, out, {a, sample({3, 5}, kFloat32)}, 0), ShapeError,
                       "sizes of tensors must match except in dimension 0");
  THD_EXPECT_THROW_MSG(detail::join_into(IntoJoin::Cat, out, {}, 0), ValueError, "expected a non-empty list of tensors");
  THD_EXPECT_THROW_MSG(detail::join_into(IntoJoin::Cat, out, {a, a}, 2), IndexError, "dim 2 is out of range");
  THD_EXPECT_THROW_MSG(detail::join_into(IntoJoin::Stack, Tensor::full({2, 3, 4}, 7, kFloat32), {a, a.t()}, 0),
                       ShapeError, "stack expects each tensor to be equal size");
  EXPECT_TRUE(same_bytes(out, before));
}

}  // namespace
}  // namespace thd
