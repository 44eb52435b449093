// Reductions on a worker return DistributedTensors that equal the local library's
// results: over everything, over dims (negative, several, empty), with keepdim, and
// the dtype rules (integer sums in int64, mean of integers is a type error).
#include <gtest/gtest.h>

#include <limits>

#include <thd/distributed.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class RemoteReductions : public JobTest<2> {};

TEST_F(RemoteReductions, SumMeanProd) {
  for (DType dt : {kBool, kUInt8, kInt32, kInt64, kFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({3, 4, 5}, dt, 1);
    expect_remote_matches("sum()", [](auto x) { return x.sum(); }, a);
    expect_remote_matches("sum({1})", [](auto x) { return x.sum({1}); }, a);
    expect_remote_matches("sum({-1}, keepdim)", [](auto x) { return x.sum({-1}, true); }, a);
    expect_remote_matches("sum({0, 2})", [](auto x) { return x.sum({0, 2}); }, a);
    expect_remote_matches("sum({})", [](auto x) { return x.sum(Dims{}); }, a);
    expect_remote_matches("mean()", [](auto x) { return x.mean(); }, a);
    expect_remote_matches("mean({0}, keepdim)", [](auto x) { return x.mean({0}, true); }, a);
    const Tensor small = sample_tensor({2, 3}, dt, 2);
    expect_remote_matches("prod()", [](auto x) { return x.prod(); }, small);
    expect_remote_matches("prod({1})", [](auto x) { return x.prod({1}); }, small);
    expect_remote_matches("prod({0}, keepdim)", [](auto x) { return x.prod({0}, true); }, small);
  }
}

TEST_F(RemoteReductions, MaxMinArgmaxArgmin) {
  for (DType dt : {kUInt8, kInt32, kInt64, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({4, 6}, dt, 3);  // small integers: ties, first index wins
    expect_remote_matches("max()", [](auto x) { return x.max(); }, a);
    expect_remote_matches("max({1})", [](auto x) { return x.max({1}); }, a);
    expect_remote_matches("max({0}, keepdim)", [](auto x) { return x.max({0}, true); }, a);
    expect_remote_matches("min()", [](auto x) { return x.min(); }, a);
    expect_remote_matches("min({-1}, keepdim)", [](auto x) { return x.min({-1}, true); }, a);
    expect_remote_matches("argmax()", [](auto x) { return x.argmax(); }, a);
    expect_remote_matches("argmax(1)", [](auto x) { return x.argmax(1); }, a);
    expect_remote_matches("argmax(0, keepdim)", [](auto x) { return x.argmax(0, true); }, a);
    expect_remote_matches("argmin()", [](auto x) { return x.argmin(); }, a);
    expect_remote_matches("argmin(-1)", [](auto x) { return x.argmin(-1); }, a);
  }
}

TEST_F(RemoteReductions, NormVarStd) {
  for (DType dt : {kInt32, kFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({3, 7}, dt, 4);
    expect_remote_matches("norm()", [](auto x) { return x.norm(); }, a);
    expect_remote_matches("norm(1)", [](auto x) { return x.norm(1.0); }, a);
    expect_remote_matches("norm(inf)", [](auto x) { return x.norm(std::numeric_limits<double>::infinity()); }, a);
    expect_remote_matches("norm(0)", [](auto x) { return x.norm(0.0); }, a);
    expect_remote_matches("norm(3, {1}, keepdim)", [](auto x) { return x.norm(3.0, {1}, true); }, a);
    expect_remote_matches("var()", [](auto x) { return x.var(); }, a);
    expect_remote_matches("var({1})", [](auto x) { return x.var({1}); }, a);
    expect_remote_matches("var({0}, 0, keepdim)", [](auto x) { return x.var({0}, 0, true); }, a);
    expect_remote_matches("std()", [](auto x) { return x.std(); }, a);
    expect_remote_matches("std({-1}, 1, keepdim)", [](auto x) { return x.std({-1}, 1, true); }, a);
    expect_remote_matches("std(all, correction 0)", [](auto x) { return x.std(Dims{}, 0); }, a);
  }
}

TEST_F(RemoteReductions, AnyAllSoftmax) {
  for (DType dt : {kBool, kInt64, kFloat32}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({3, 4}, dt, 5);
    expect_remote_matches("any()", [](auto x) { return x.any(); }, a);
    expect_remote_matches("any({1})", [](auto x) { return x.any({1}); }, a);
    expect_remote_matches("all()", [](auto x) { return x.all(); }, a);
    expect_remote_matches("all({0}, keepdim)", [](auto x) { return x.all({0}, true); }, a);
  }
  for (DType dt : {kFloat16, kFloat32, kFloat64, kInt64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({3, 5}, dt, 6);
    expect_remote_matches("softmax(1)", [](auto x) { return x.softmax(1); }, a);
    expect_remote_matches("softmax(0)", [](auto x) { return x.softmax(0); }, a);
    expect_remote_matches("log_softmax(-1)", [](auto x) { return x.log_softmax(-1); }, a);
  }
}

TEST_F(RemoteReductions, ReductionsOfReductionsAndItem) {
  const Tensor a = sample_tensor({4, 5}, kFloat64, 7);
  expect_remote_matches("sum of a mean", [](auto x) { return x.mean({1}).sum(); }, a);
  expect_remote_matches("softmax sums to 1", [](auto x) { return x.softmax(1).sum({1}); }, a);
  DistributedTensor x = DistributedTensor::from(a);
  EXPECT_DOUBLE_EQ(x.sum().item<double>(), a.sum().item<double>());
  EXPECT_EQ(x.argmax().item<int64_t>(), a.argmax().item<int64_t>());
  EXPECT_EQ(x.gt(100).any().item<bool>(), false);
  EXPECT_EQ(x.sum().item().to_double(), a.sum().item().to_double());
}

TEST_F(RemoteReductions, BadReductionsThrowLikeTheLocalLibrary) {
  const Tensor a = sample_tensor({3, 4}, kFloat32, 8);
  expect_remote_matches("sum over a dim out of range", [](auto x) { return x.sum({2}); }, a);
  expect_remote_matches("sum over a repeated dim", [](auto x) { return x.sum({1, -1}); }, a);
  expect_remote_matches("argmax over a dim out of range", [](auto x) { return x.argmax(-3); }, a);
  expect_remote_matches("softmax over a dim out of range", [](auto x) { return x.softmax(2); }, a);
  expect_remote_matches("mean of integers", [](auto x) { return x.mean(); }, sample_tensor({3}, kInt64, 9));
  expect_remote_matches("var of integers", [](auto x) { return x.var({0}); }, sample_tensor({3}, kInt32, 9));
  expect_remote_matches("max of an empty tensor", [](auto x) { return x.max(); }, Tensor::zeros({0, 3}));
}

}  // namespace
}  // namespace thd::test
