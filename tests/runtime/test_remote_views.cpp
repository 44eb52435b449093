// Views of remote tensors: the master's metadata mirror (shape, strides, contiguity)
// matches the local library's view, get() of a view downloads its elements in order,
// ops read through views, and in-place ops on a view write through to its base.
#include <gtest/gtest.h>

#include <thd/distributed.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class RemoteViews : public JobTest<2> {};

TEST_F(RemoteViews, EveryViewOp) {
  for (DType dt : {kInt64, kFloat32}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({2, 3, 4}, dt, 1);
    expect_remote_matches("view", [](auto x) { return x.view({6, 4}); }, a);
    expect_remote_matches("view(-1)", [](auto x) { return x.view({-1}); }, a);
    expect_remote_matches("reshape", [](auto x) { return x.reshape({4, -1}); }, a);
    expect_remote_matches("reshape of a transpose (copies)", [](auto x) { return x.transpose(0, 2).reshape({24}); },
                          a);
    expect_remote_matches("flatten", [](auto x) { return x.flatten(); }, a);
    expect_remote_matches("flatten(1)", [](auto x) { return x.flatten(1); }, a);
    expect_remote_matches("flatten(0, 1)", [](auto x) { return x.flatten(0, 1); }, a);
    expect_remote_matches("transpose", [](auto x) { return x.transpose(0, 2); }, a);
    expect_remote_matches("transpose(-1, -2)", [](auto x) { return x.transpose(-1, -2); }, a);
    expect_remote_matches("t", [](auto x) { return x.select(0, 1).t(); }, a);
    expect_remote_matches("permute", [](auto x) { return x.permute({2, 0, 1}); }, a);
    expect_remote_matches("slice", [](auto x) { return x.slice(2, 1, 4, 2); }, a);
    expect_remote_matches("slice (clamped, negative)", [](auto x) { return x.slice(1, -2, 100); }, a);
    expect_remote_matches("narrow", [](auto x) { return x.narrow(2, 1, 2); }, a);
    expect_remote_matches("select", [](auto x) { return x.select(1, 2); }, a);
    expect_remote_matches("select(-1)", [](auto x) { return x.select(0, -1); }, a);
    expect_remote_matches("unsqueeze", [](auto x) { return x.unsqueeze(1); }, a);
    expect_remote_matches("unsqueeze(-1)", [](auto x) { return x.unsqueeze(-1); }, a);
    expect_remote_matches("contiguous of a permute", [](auto x) { return x.permute({1, 2, 0}).contiguous(); }, a);
    expect_remote_matches("contiguous of a contiguous tensor", [](auto x) { return x.contiguous(); }, a);
    expect_remote_matches("clone of a slice", [](auto x) { return x.slice(2, 0, 4, 3).clone(); }, a);

    const Tensor ones_dims = sample_tensor({1, 4, 1}, dt, 2);
    expect_remote_matches("squeeze", [](auto x) { return x.squeeze(); }, ones_dims);
    expect_remote_matches("squeeze(0)", [](auto x) { return x.squeeze(0); }, ones_dims);
    expect_remote_matches("squeeze(1) (not size 1)", [](auto x) { return x.squeeze(1); }, ones_dims);
    expect_remote_matches("expand", [](auto x) { return x.expand({3, 4, 5}); }, ones_dims);
    expect_remote_matches("expand(-1)", [](auto x) { return x.expand({2, -1, 3}); }, ones_dims);
    expect_remote_matches("expand_as", [](auto x, auto y) { return x.expand_as(y); }, ones_dims,
                          sample_tensor({2, 4, 6}, kFloat64, 3));
  }
}

TEST_F(RemoteViews, ChainsOfViewsAndOpsOnViews) {
  const Tensor a = sample_tensor({4, 6}, kFloat32, 4);
  const Tensor b = sample_tensor({4, 6}, kFloat32, 5);
  expect_remote_matches("view of a slice of a transpose",
                        [](auto x) { return x.t().slice(0, 1, 5).select(1, 2).unsqueeze(0).expand({3, 4}); }, a);
  expect_remote_matches("add on transposed views", [](auto x, auto y) { return x.t() + y.t(); }, a, b);
  expect_remote_matches("add of a view and its base's transpose", [](auto x) { return x.view({6, 4}) + x.t(); }, a);
  expect_remote_matches("mul of a broadcast view", [](auto x, auto y) { return x.select(0, 0).expand({4, 6}) * y; },
                        a, b);
  expect_remote_matches("sum over a strided slice", [](auto x) { return x.slice(1, 0, 6, 2).sum({1}); }, a);
  expect_remote_matches("matmul of a transpose", [](auto x, auto y) { return x.t().matmul(y); }, a, b);
  expect_remote_matches("exp of a permuted view", [](auto x) { return x.view({2, 2, 6}).permute({2, 0, 1}).exp(); },
                        a);
  expect_remote_matches("view after contiguous", [](auto x) { return x.t().contiguous().view({-1}); }, a);
}

TEST_F(RemoteViews, InPlaceOpsWriteThroughToTheBase) {
  const Tensor a = sample_tensor({3, 4}, kFloat64, 6);
  const Tensor b = sample_tensor({4, 3}, kFloat64, 7);
  expect_remote_matches("add_ on a transpose", [](auto x) {
    x.t().add_(10);
    return x;
  }, a);
  expect_remote_matches("fill_ on a select", [](auto x) {
    x.select(0, 1).fill_(7);
    return x;
  }, a);
  expect_remote_matches("mul_ on a strided slice", [](auto x) {
    x.slice(1, 0, 4, 2).mul_(-2);
    return x;
  }, a);
  expect_remote_matches("copy_ into a narrow", [](auto x, auto y) {
    x.narrow(1, 1, 2).copy_(y.slice(0, 0, 2).t());
    return x;
  }, a, b);
  expect_remote_matches("neg_ on a flat view", [](auto x) {
    x.view({-1}).neg_();
    return x;
  }, a);
  expect_remote_matches("clamp_ on a permute", [](auto x) {
    x.unsqueeze(0).permute({2, 0, 1}).clamp_(-1, 1);
    return x;
  }, a);
  expect_remote_matches("add_ of another tensor on a view", [](auto x, auto y) {
    x.t().add_(y);
    return x;
  }, a, b);
  expect_remote_matches("masked_fill_ on a view", [](auto x) {
    auto v = x.slice(0, 1, 3);
    v.masked_fill_(v.gt(0), 0);
    return x;
  }, a);
  // A view taken before an in-place op on its base sees the new values.
  expect_remote_matches("view taken before the write", [](auto x) {
    auto row = x.select(0, 2);
    x.fill_(3);
    return row;
  }, a);
}

TEST_F(RemoteViews, BadViewsThrowLikeTheLocalLibrary) {
  const Tensor a = sample_tensor({2, 3}, kFloat32, 8);
  expect_remote_matches("view to a size that does not fit", [](auto x) { return x.view({4, 2}); }, a);
  expect_remote_matches("view of a transpose", [](auto x) { return x.t().view({6}); }, a);
  expect_remote_matches("two -1 in view", [](auto x) { return x.view({-1, -1}); }, a);
  expect_remote_matches("select out of range", [](auto x) { return x.select(0, 2); }, a);
  expect_remote_matches("transpose of a dim out of range", [](auto x) { return x.transpose(0, 2); }, a);
  expect_remote_matches("permute with a repeated dim", [](auto x) { return x.permute({0, 0}); }, a);
  expect_remote_matches("permute of the wrong length", [](auto x) { return x.permute({1, 0, 2}); }, a);
  expect_remote_matches("expand of a non-1 dim", [](auto x) { return x.expand({4, 3}); }, a);
  expect_remote_matches("narrow past the end", [](auto x) { return x.narrow(1, 2, 2); }, a);
  expect_remote_matches("slice with step 0", [](auto x) { return x.slice(1, 0, 3, 0); }, a);
  expect_remote_matches("unsqueeze out of range", [](auto x) { return x.unsqueeze(4); }, a);
  expect_remote_matches("flatten with start after end", [](auto x) { return x.flatten(1, 0); }, a);
  expect_remote_matches("t of 3 dims", [](auto x) { return x.unsqueeze(0).t(); }, a);
  expect_remote_matches("in-place on an expanded view", [](auto x) {
    x.select(0, 0).expand({2, 3}).add_(1);
    return x;
  }, a);
}

}  // namespace
}  // namespace thd::test
