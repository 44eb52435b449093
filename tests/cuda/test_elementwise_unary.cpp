// neg, abs, relu, exp, log, sqrt, rsqrt, sin, cos, tanh, sigmoid, gelu and clamp on
// CUDA tensors against the CPU: every dtype (the float functions give float32 for
// integer and bool input), views, 0-dim and empty tensors, special values, in-place
// forms and their errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "elementwise_test_util.h"

namespace thd {
namespace {

using testing::expect_same_as_cpu;
using testing::kAllDTypes;
using testing::named;
using testing::random_cpu;

struct UnaryOp {
  std::string name;
  Tensor (*out_of_place)(const Tensor&);
  Tensor& (*in_place)(Tensor&);
};

const std::vector<UnaryOp>& unary_ops() {
  static const std::vector<UnaryOp> ops = {
      {"neg", [](const Tensor& t) { return -t; }, [](Tensor& t) -> Tensor& { return t.neg_(); }},
      {"abs", [](const Tensor& t) { return t.abs(); },
       [](Tensor& t) -> Tensor& { return t.abs_(); }},
      {"relu", [](const Tensor& t) { return t.relu(); },
       [](Tensor& t) -> Tensor& { return t.relu_(); }},
      {"exp", [](const Tensor& t) { return t.exp(); },
       [](Tensor& t) -> Tensor& { return t.exp_(); }},
      {"log", [](const Tensor& t) { return t.log(); },
       [](Tensor& t) -> Tensor& { return t.log_(); }},
      {"sqrt", [](const Tensor& t) { return t.sqrt(); },
       [](Tensor& t) -> Tensor& { return t.sqrt_(); }},
      {"rsqrt", [](const Tensor& t) { return t.rsqrt(); },
       [](Tensor& t) -> Tensor& { return t.rsqrt_(); }},
      {"sin", [](const Tensor& t) { return t.sin(); },
       [](Tensor& t) -> Tensor& { return t.sin_(); }},
      {"cos", [](const Tensor& t) { return t.cos(); },
       [](Tensor& t) -> Tensor& { return t.cos_(); }},
      {"tanh", [](const Tensor& t) { return t.tanh(); },
       [](Tensor& t) -> Tensor& { return t.tanh_(); }},
      {"sigmoid", [](const Tensor& t) { return t.sigmoid(); },
       [](Tensor& t) -> Tensor& { return t.sigmoid_(); }},
      {"gelu", [](const Tensor& t) { return t.gelu(); },
       [](Tensor& t) -> Tensor& { return t.gelu_(); }},
  };
  return ops;
}

// Inputs the float functions are defined on (log and sqrt of |x|), so the results
// are numbers to compare rather than mostly NaN; negative inputs are covered by the
// special values.
Tensor input_for(const UnaryOp& op, const Shape& shape, DType dtype) {
  Tensor t = random_cpu(shape, dtype);
  if ((op.name == "log" || op.name == "sqrt" || op.name == "rsqrt") && dtype != kBool &&
      dtype != kUInt8) {
    t = t.abs();
  }
  return t;
}

TEST(CudaUnary, EveryDType) {
  THD_REQUIRE_CUDA();
  for (const UnaryOp& op : unary_ops()) {
    for (DType dt : kAllDTypes) {
      expect_same_as_cpu(
          {input_for(op, {4, 999}, dt)},
          [&](std::vector<Tensor>& t) { return op.out_of_place(t[0]); }, named(op.name, dt));
    }
  }
}

TEST(CudaUnary, ViewsZeroDimAndEmpty) {
  THD_REQUIRE_CUDA();
  for (const UnaryOp& op : unary_ops()) {
    for (DType dt : {kFloat32, kBFloat16, kInt32}) {
      expect_same_as_cpu(
          {input_for(op, {37, 12}, dt)},
          [&](std::vector<Tensor>& t) { return op.out_of_place(t[0].t()); },
          named(op.name, dt) + " transposed");
      expect_same_as_cpu(
          {input_for(op, {5, 64}, dt)},
          [&](std::vector<Tensor>& t) { return op.out_of_place(t[0].slice(1, 3, 64, 5)); },
          named(op.name, dt) + " stepped slice");
      expect_same_as_cpu(
          {input_for(op, {1, 30}, dt)},
          [&](std::vector<Tensor>& t) {
            return op.out_of_place(t[0].expand({4, 30}));
          },
          named(op.name, dt) + " expanded");
      expect_same_as_cpu(
          {input_for(op, {}, dt)}, [&](std::vector<Tensor>& t) { return op.out_of_place(t[0]); },
          named(op.name, dt) + " 0-dim");
      expect_same_as_cpu(
          {input_for(op, {3, 0}, dt)},
          [&](std::vector<Tensor>& t) { return op.out_of_place(t[0]); },
          named(op.name, dt) + " empty");
    }
  }
}

TEST(CudaUnary, InPlace) {
  THD_REQUIRE_CUDA();
  // Float functions in place on integer tensors cannot store their float result:
  // TypeError on both; neg_ on bool: TypeError on both.
  for (const UnaryOp& op : unary_ops()) {
    for (DType dt : kAllDTypes) {
      expect_same_as_cpu(
          {input_for(op, {3, 333}, dt)}, [&](std::vector<Tensor>& t) { return op.in_place(t[0]); },
          named(op.name, dt) + " in place");
      expect_same_as_cpu(
          {input_for(op, {40, 9}, dt)},
          [&](std::vector<Tensor>& t) {
            Tensor view = t[0].t().slice(1, 1, 40, 3);
            op.in_place(view);
            return t[0];
          },
          named(op.name, dt) + " in place into a view");
    }
  }
}

TEST(CudaUnary, SpecialValuesAndOddSizes) {
  THD_REQUIRE_CUDA();
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor special = Tensor::from_vector<double>(
      {nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e30, -1e30, 1e-30, 88.0, -88.0, 710.0});
  const int64_t n = (int64_t{1} << 20) + 3;
  for (const UnaryOp& op : unary_ops()) {
    for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
      expect_same_as_cpu(
          {special.to(dt)}, [&](std::vector<Tensor>& t) { return op.out_of_place(t[0]); },
          named(op.name, dt) + " special values");
    }
    // One past alignment: unaligned head, vectors, tail.
    expect_same_as_cpu(
        {input_for(op, {n + 1}, kFloat16)},
        [&](std::vector<Tensor>& t) { return op.out_of_place(t[0].slice(0, 1, n + 1)); },
        op.name + " large offset 1");
  }
}

TEST(CudaUnary, Clamp) {
  THD_REQUIRE_CUDA();
  using Bound = std::optional<Scalar>;
  const std::vector<std::pair<Bound, Bound>> bounds = {
      {Scalar(-0.5), Scalar(0.5)}, {Scalar(-1), std::nullopt},
      {std::nullopt, Scalar(2)},   {Scalar(1), Scalar(-1)},  // min > max: max everywhere
      {Scalar(-20), Scalar(20)},   {Scalar(2.5), std::nullopt}};
  for (DType dt : kAllDTypes) {
    for (const auto& [lo, hi] : bounds) {
      const std::string what = named("clamp", dt);
      expect_same_as_cpu(
          {random_cpu({7, 55}, dt)}, [&](std::vector<Tensor>& t) { return t[0].clamp(lo, hi); },
          what);
      expect_same_as_cpu(
          {random_cpu({55, 7}, dt)}, [&](std::vector<Tensor>& t) { return t[0].t().clamp(lo, hi); },
          what + " transposed");
      expect_same_as_cpu(
          {random_cpu({7, 55}, dt)},
          [&](std::vector<Tensor>& t) {
            Tensor view = t[0].slice(1, 0, 55, 2);
            view.clamp_(lo, hi);
            return t[0];
          },
          what + " in place");
    }
  }
  // NaN stays NaN.
  Tensor special = Tensor::from_vector<float>({std::nanf(""), -3.0f, 3.0f, 0.0f});
  expect_same_as_cpu(
      {special}, [](std::vector<Tensor>& t) { return t[0].clamp(-1, 1); }, "clamp NaN");
  Tensor g = Tensor::ones({3}, kFloat32, Device::cuda(0));
  EXPECT_THROW(g.clamp(std::nullopt, std::nullopt), ValueError);
}

TEST(CudaUnary, Errors) {
  THD_REQUIRE_CUDA();
  Tensor gb = Tensor::ones({3}, kBool, Device::cuda(0));
  EXPECT_THROW(-gb, TypeError);
  EXPECT_THROW(gb.abs(), TypeError);
  Tensor gi = Tensor::ones({3}, kInt64, Device::cuda(0));
  EXPECT_THROW(gi.sqrt_(), TypeError);
  EXPECT_THROW(gi.expand({2, 3}).neg_(), ValueError);
}

}  // namespace
}  // namespace thd
