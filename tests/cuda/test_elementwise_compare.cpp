// eq, ne, lt, le, gt, ge and where on CUDA tensors against the CPU: every dtype,
// tensor and scalar operands, broadcasting, views, 0-dim and empty tensors, NaN, and
// the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "elementwise_test_util.h"

namespace thd {
namespace {

using testing::expect_same_as_cpu;
using testing::kAllDTypes;
using testing::named;
using testing::random_cpu;

struct CompareOp {
  std::string name;
  Tensor (*tensor_tensor)(const Tensor&, const Tensor&);
  Tensor (*tensor_scalar)(const Tensor&, Scalar);
};

const std::vector<CompareOp>& compare_ops() {
  static const std::vector<CompareOp> ops = {
      {"eq", [](const Tensor& a, const Tensor& b) { return a.eq(b); },
       [](const Tensor& a, Scalar b) { return a.eq(b); }},
      {"ne", [](const Tensor& a, const Tensor& b) { return a.ne(b); },
       [](const Tensor& a, Scalar b) { return a.ne(b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return a.lt(b); },
       [](const Tensor& a, Scalar b) { return a.lt(b); }},
      {"le", [](const Tensor& a, const Tensor& b) { return a.le(b); },
       [](const Tensor& a, Scalar b) { return a.le(b); }},
      {"gt", [](const Tensor& a, const Tensor& b) { return a.gt(b); },
       [](const Tensor& a, Scalar b) { return a.gt(b); }},
      {"ge", [](const Tensor& a, const Tensor& b) { return a.ge(b); },
       [](const Tensor& a, Scalar b) { return a.ge(b); }},
  };
  return ops;
}

// Values drawn from few so that equal pairs occur: integers in [-3, 3], floats their
// halves.
Tensor few_values(const Shape& shape, DType dtype) {
  Tensor t = Tensor::randint(-3, 4, shape, kInt64);
  if (dtype == kBool || dtype == kUInt8) t = t.abs();
  return is_floating_point(dtype) ? (t.to(kFloat32) / 2).to(dtype) : t.to(dtype);
}

TEST(CudaCompare, EveryDTypeAndLayout) {
  THD_REQUIRE_CUDA();
  for (const CompareOp& op : compare_ops()) {
    for (DType dt : kAllDTypes) {
      expect_same_as_cpu(
          {few_values({5, 301}, dt), few_values({5, 301}, dt)},
          [&](std::vector<Tensor>& t) { return op.tensor_tensor(t[0], t[1]); }, named(op.name, dt));
      expect_same_as_cpu(
          {few_values({301, 5}, dt), few_values({5, 1}, dt)},
          [&](std::vector<Tensor>& t) { return op.tensor_tensor(t[0].t(), t[1]); },
          named(op.name, dt) + " transposed with broadcast");
      expect_same_as_cpu(
          {few_values({}, dt), few_values({4, 3}, dt)},
          [&](std::vector<Tensor>& t) { return op.tensor_tensor(t[0], t[1]); },
          named(op.name, dt) + " 0-dim");
      expect_same_as_cpu(
          {few_values({0, 4}, dt), few_values({4}, dt)},
          [&](std::vector<Tensor>& t) { return op.tensor_tensor(t[0], t[1]); },
          named(op.name, dt) + " empty");
      for (const Scalar& s : {Scalar(1), Scalar(-0.5), Scalar(true), Scalar(300)}) {
        expect_same_as_cpu(
            {few_values({3, 101}, dt)},
            [&](std::vector<Tensor>& t) { return op.tensor_scalar(t[0], s); },
            named(op.name, dt) + " scalar " + ::testing::PrintToString(s));
      }
    }
  }
}

TEST(CudaCompare, MixedDTypesAndNaN) {
  THD_REQUIRE_CUDA();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor special = Tensor::from_vector<float>({nan, 1.0f, -0.0f, 0.0f, INFINITY, nan});
  Tensor other = Tensor::from_vector<float>({nan, nan, 0.0f, -0.0f, INFINITY, 2.0f});
  for (const CompareOp& op : compare_ops()) {
    expect_same_as_cpu(
        {few_values({99}, kInt32), few_values({99}, kFloat16)},
        [&](std::vector<Tensor>& t) { return op.tensor_tensor(t[0], t[1]); },
        op.name + " int32 with float16");
    expect_same_as_cpu(
        {few_values({99}, kUInt8), few_values({99}, kInt8)},
        [&](std::vector<Tensor>& t) { return op.tensor_tensor(t[0], t[1]); },
        op.name + " uint8 with int8");
    for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
      expect_same_as_cpu(
          {special.to(dt), other.to(dt)},
          [&](std::vector<Tensor>& t) { return op.tensor_tensor(t[0], t[1]); },
          named(op.name, dt) + " NaN and signed zeros");
    }
  }
}

TEST(CudaWhere, EveryDTypeAndLayout) {
  THD_REQUIRE_CUDA();
  for (DType dt : kAllDTypes) {
    const Tensor cond = random_cpu({6, 77}, kBool);
    expect_same_as_cpu(
        {cond, random_cpu({6, 77}, dt), random_cpu({6, 77}, dt)},
        [](std::vector<Tensor>& t) { return where(t[0], t[1], t[2]); }, named("where", dt));
    expect_same_as_cpu(
        {random_cpu({77, 1}, kBool), random_cpu({6, 77}, dt), random_cpu({77, 6}, dt)},
        [](std::vector<Tensor>& t) { return where(t[0].t(), t[1], t[2].t()); },
        named("where", dt) + " broadcast and transposed");
    expect_same_as_cpu(
        {cond, random_cpu({}, dt), random_cpu({6, 1}, dt)},
        [](std::vector<Tensor>& t) { return where(t[0], t[1], t[2]); },
        named("where", dt) + " 0-dim operand");
    expect_same_as_cpu(
        {random_cpu({0, 3}, kBool), random_cpu({0, 3}, dt), random_cpu({3}, dt)},
        [](std::vector<Tensor>& t) { return where(t[0], t[1], t[2]); },
        named("where", dt) + " empty");
  }
  // Operands of different dtypes promote.
  expect_same_as_cpu(
      {random_cpu({50}, kBool), random_cpu({50}, kInt32), random_cpu({50}, kFloat16)},
      [](std::vector<Tensor>& t) { return where(t[0], t[1], t[2]); }, "where int32 float16");
}

TEST(CudaWhere, Scalars) {
  THD_REQUIRE_CUDA();
  const std::vector<std::pair<Scalar, Scalar>> pairs = {{Scalar(1), Scalar(-2)},
                                                        {Scalar(1.5), Scalar(0)},
                                                        {Scalar(true), Scalar(false)},
                                                        {Scalar(2.5), Scalar(-1e30)}};
  for (const auto& [a, b] : pairs) {
    expect_same_as_cpu(
        {random_cpu({8, 63}, kBool)}, [&](std::vector<Tensor>& t) { return where(t[0], a, b); },
        "where scalars " + ::testing::PrintToString(a) + " " + ::testing::PrintToString(b));
    expect_same_as_cpu(
        {random_cpu({63, 8}, kBool)}, [&](std::vector<Tensor>& t) { return where(t[0].t(), a, b); },
        "where scalars, transposed condition");
  }
  expect_same_as_cpu(
      {random_cpu({}, kBool)}, [&](std::vector<Tensor>& t) { return where(t[0], 3, 4); },
      "where 0-dim condition");
}

TEST(CudaCompare, Errors) {
  THD_REQUIRE_CUDA();
  Tensor g = Tensor::ones({3}, kFloat32, Device::cuda(0));
  Tensor c = Tensor::ones({3}, kFloat32);
  Tensor gb = Tensor::ones({3}, kBool, Device::cuda(0));
  EXPECT_THROW(g.eq(c), ValueError);
  EXPECT_THROW(c.lt(g), ValueError);
  EXPECT_THROW(g.ge(Tensor::ones({}, kFloat32)), ValueError);
  EXPECT_THROW(where(gb, g, c), ValueError);
  EXPECT_THROW(where(gb.cpu(), g, g), ValueError);
  EXPECT_THROW(where(g, g, g), TypeError);
  EXPECT_THROW(where(g, 1, 2), TypeError);
  EXPECT_THROW(g.eq(Tensor::ones({2}, kFloat32, Device::cuda(0))), ShapeError);
}

}  // namespace
}  // namespace thd
