// add, sub, mul, div, pow, maximum and minimum on CUDA tensors against the CPU: every
// dtype, tensor and scalar operands, broadcasting, views, 0-dim and empty tensors,
// in-place forms (also where the result must be cast back), overlapping operands,
// sizes that leave unaligned heads and tails to the vector path, and the errors.
#include <gtest/gtest.h>

#include <cstdint>
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

struct BinaryOp {
  std::string name;
  Tensor (*tensor_tensor)(const Tensor&, const Tensor&);
  Tensor (*tensor_scalar)(const Tensor&, Scalar);  // nullptr: no such form
  Tensor (*scalar_tensor)(Scalar, const Tensor&);  // nullptr: no such form
  Tensor& (*in_place)(Tensor&, const Tensor&);     // nullptr: no such form
  Tensor& (*in_place_scalar)(Tensor&, Scalar);     // nullptr: no such form
};

const std::vector<BinaryOp>& binary_ops() {
  static const std::vector<BinaryOp> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; },
       [](const Tensor& a, Scalar b) { return a + b; },
       [](Scalar a, const Tensor& b) { return a + b; },
       [](Tensor& a, const Tensor& b) -> Tensor& { return a += b; },
       [](Tensor& a, Scalar b) -> Tensor& { return a += b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; },
       [](const Tensor& a, Scalar b) { return a - b; },
       [](Scalar a, const Tensor& b) { return a - b; },
       [](Tensor& a, const Tensor& b) -> Tensor& { return a -= b; },
       [](Tensor& a, Scalar b) -> Tensor& { return a -= b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; },
       [](const Tensor& a, Scalar b) { return a * b; },
       [](Scalar a, const Tensor& b) { return a * b; },
       [](Tensor& a, const Tensor& b) -> Tensor& { return a *= b; },
       [](Tensor& a, Scalar b) -> Tensor& { return a *= b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; },
       [](const Tensor& a, Scalar b) { return a / b; },
       [](Scalar a, const Tensor& b) { return a / b; },
       [](Tensor& a, const Tensor& b) -> Tensor& { return a /= b; },
       [](Tensor& a, Scalar b) -> Tensor& { return a /= b; }},
      {"pow", [](const Tensor& a, const Tensor& b) { return a.pow(b); },
       [](const Tensor& a, Scalar b) { return a.pow(b); }, nullptr,
       [](Tensor& a, const Tensor& b) -> Tensor& { return a.pow_(b); },
       [](Tensor& a, Scalar b) -> Tensor& { return a.pow_(b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return a.maximum(b); }, nullptr, nullptr,
       nullptr, nullptr},
      {"minimum", [](const Tensor& a, const Tensor& b) { return a.minimum(b); }, nullptr, nullptr,
       nullptr, nullptr},
  };
  return ops;
}

// Random operands; pow's integer exponents are made >= 0, so that they give values
// (negative ones are an error, tested apart).
Tensor first_operand(const Shape& shape, DType dtype) { return random_cpu(shape, dtype); }
Tensor second_operand(const BinaryOp& op, const Shape& shape, DType dtype) {
  Tensor t = random_cpu(shape, dtype);
  return op.name == "pow" && is_integral(dtype) ? t.abs() : t;
}

TEST(CudaBinary, SameShapeEveryDType) {
  THD_REQUIRE_CUDA();
  for (const BinaryOp& op : binary_ops()) {
    for (DType dt : kAllDTypes) {
      const Shape shape{3, 1001};
      expect_same_as_cpu(
          {first_operand(shape, dt), second_operand(op, shape, dt)},
          [&](std::vector<Tensor>& t) { return op.tensor_tensor(t[0], t[1]); }, named(op.name, dt));
    }
  }
}

TEST(CudaBinary, MixedDTypesPromote) {
  THD_REQUIRE_CUDA();
  const std::vector<std::pair<DType, DType>> pairs = {
      {kInt32, kFloat16}, {kUInt8, kInt8},      {kBool, kInt64},  {kFloat16, kBFloat16},
      {kInt64, kFloat64}, {kFloat32, kFloat16}, {kBool, kFloat32}};
  for (const BinaryOp& op : binary_ops()) {
    for (auto [da, db] : pairs) {
      expect_same_as_cpu(
          {first_operand({257}, da), second_operand(op, {257}, db)},
          [&](std::vector<Tensor>& t) { return op.tensor_tensor(t[0], t[1]); },
          named(op.name, da) + " with " + std::string(dtype_name(db)));
    }
  }
}

TEST(CudaBinary, BroadcastViewsZeroDimAndEmpty) {
  THD_REQUIRE_CUDA();
  struct Layout {
    std::string name;
    Shape a, b;
    Tensor (*view_a)(const Tensor&);
    Tensor (*view_b)(const Tensor&);
  };
  const auto same = [](const Tensor& t) { return t; };
  const std::vector<Layout> layouts = {
      {"broadcast", {4, 1, 5}, {3, 5}, same, same},
      {"row broadcast", {7, 33}, {33}, same, same},
      {"transposed", {33, 7}, {7, 33}, [](const Tensor& t) { return t.t(); }, same},
      {"both transposed",
       {33, 7},
       {33, 7},
       [](const Tensor& t) { return t.t(); },
       [](const Tensor& t) { return t.t(); }},
      {"stepped slice",
       {5, 40},
       {5, 20},
       [](const Tensor& t) { return t.slice(1, 0, 40, 2); },
       same},
      {"expanded",
       {1, 9},
       {6, 9},
       [](const Tensor& t) {
         return t.expand({6, 9});
       },
       same},
      {"0-dim and tensor", {}, {6, 5}, same, same},
      {"tensor and 0-dim", {6, 5}, {}, same, same},
      {"0-dim and 0-dim", {}, {}, same, same},
      {"size-1 and 0-dim", {1}, {}, same, same},
      {"empty", {0, 3}, {0, 3}, same, same},
      {"empty broadcast", {0, 1}, {4}, same, same},
      {"permuted 3-d",
       {4, 5, 6},
       {6, 5, 4},
       [](const Tensor& t) {
         return t.permute({2, 1, 0});
       },
       same},
  };
  for (const BinaryOp& op : binary_ops()) {
    for (DType dt : {kFloat32, kInt64, kFloat16, kUInt8}) {
      for (const Layout& l : layouts) {
        expect_same_as_cpu(
            {first_operand(l.a, dt), second_operand(op, l.b, dt)},
            [&](std::vector<Tensor>& t) {
              return op.tensor_tensor(l.view_a(t[0]), l.view_b(t[1]));
            },
            named(op.name, dt) + " " + l.name);
      }
    }
  }
}

TEST(CudaBinary, ScalarOperands) {
  THD_REQUIRE_CUDA();
  const std::vector<Scalar> scalars = {Scalar(3), Scalar(-2), Scalar(2.5), Scalar(true), Scalar(0)};
  for (const BinaryOp& op : binary_ops()) {
    for (DType dt : kAllDTypes) {
      for (const Scalar& s : scalars) {
        const std::string what = named(op.name, dt) + " scalar " + ::testing::PrintToString(s);
        if (op.tensor_scalar != nullptr) {
          expect_same_as_cpu(
              {first_operand({5, 77}, dt)},
              [&](std::vector<Tensor>& t) { return op.tensor_scalar(t[0], s); }, what);
          // A transposed tensor takes the strided kernel with the value.
          expect_same_as_cpu(
              {first_operand({77, 5}, dt)},
              [&](std::vector<Tensor>& t) { return op.tensor_scalar(t[0].t(), s); },
              what + " transposed");
          expect_same_as_cpu(
              {first_operand({}, dt)},
              [&](std::vector<Tensor>& t) { return op.tensor_scalar(t[0], s); }, what + " 0-dim");
        }
        if (op.scalar_tensor != nullptr) {
          expect_same_as_cpu(
              {second_operand(op, {5, 77}, dt)},
              [&](std::vector<Tensor>& t) { return op.scalar_tensor(s, t[0]); }, what + " first");
        }
        if (op.in_place_scalar != nullptr) {
          expect_same_as_cpu(
              {first_operand({5, 77}, dt)},
              [&](std::vector<Tensor>& t) {
                Tensor view = t[0].slice(1, 1, 77, 3);
                op.in_place_scalar(view, s);
                return t[0];
              },
              what + " in place");
        }
      }
    }
  }
}

TEST(CudaBinary, InPlace) {
  THD_REQUIRE_CUDA();
  for (const BinaryOp& op : binary_ops()) {
    if (op.in_place == nullptr) continue;
    for (DType dt : kAllDTypes) {
      const std::string what = named(op.name, dt);
      expect_same_as_cpu(
          {first_operand({6, 50}, dt), second_operand(op, {6, 50}, dt)},
          [&](std::vector<Tensor>& t) { return op.in_place(t[0], t[1]); }, what + " contiguous");
      expect_same_as_cpu(
          {first_operand({6, 50}, dt), second_operand(op, {50}, dt)},
          [&](std::vector<Tensor>& t) { return op.in_place(t[0], t[1]); },
          what + " broadcast other");
      // Writes into a view: the elements outside it must stay.
      expect_same_as_cpu(
          {first_operand({50, 6}, dt), second_operand(op, {3, 50}, dt)},
          [&](std::vector<Tensor>& t) {
            Tensor view = t[0].t().slice(0, 1, 6, 2);
            op.in_place(view, t[1]);
            return t[0];
          },
          what + " into a transposed slice");
    }
  }
}

TEST(CudaBinary, InPlaceCastsBackOrRefuses) {
  THD_REQUIRE_CUDA();
  // float16 self with a float32 operand computes in float32 and casts back;
  // int self with a float operand cannot hold the result: TypeError on both.
  const std::vector<std::pair<DType, DType>> pairs = {
      {kFloat16, kFloat32}, {kBFloat16, kFloat64}, {kInt32, kInt64},    {kUInt8, kInt32},
      {kInt64, kFloat32},   {kBool, kInt32},       {kFloat32, kFloat64}};
  for (const BinaryOp& op : binary_ops()) {
    if (op.in_place == nullptr) continue;
    for (auto [self, other] : pairs) {
      expect_same_as_cpu(
          {first_operand({4, 33}, self), second_operand(op, {4, 33}, other)},
          [&](std::vector<Tensor>& t) { return op.in_place(t[0], t[1]); },
          named(op.name, self) + " in place with " + std::string(dtype_name(other)));
    }
  }
  // An integer scalar into a float16 tensor stays float16; a float one into int fails.
  for (const BinaryOp& op : binary_ops()) {
    if (op.in_place_scalar == nullptr) continue;
    for (DType dt : {kFloat16, kInt32}) {
      expect_same_as_cpu(
          {first_operand({100}, dt)},
          [&](std::vector<Tensor>& t) { return op.in_place_scalar(t[0], 1.5); },
          named(op.name, dt) + " in place with 1.5");
    }
  }
}

TEST(CudaBinary, OverlappingOperands) {
  THD_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kInt32, kFloat16}) {
    // The same view on both sides, and shifted views of one storage, in place: the
    // op must read the values as they were before it wrote any.
    expect_same_as_cpu(
        {random_cpu({200}, dt)}, [](std::vector<Tensor>& t) { return t[0] += t[0]; },
        named("a += a", dt));
    expect_same_as_cpu(
        {random_cpu({200}, dt)},
        [](std::vector<Tensor>& t) {
          Tensor tail = t[0].slice(0, 1, 200);
          tail.mul_(t[0].slice(0, 0, 199));
          return t[0];
        },
        named("shifted in place", dt));
    expect_same_as_cpu(
        {random_cpu({20, 20}, dt)},
        [](std::vector<Tensor>& t) {
          t[0].sub_(t[0].t());
          return t[0];
        },
        named("a -= a.t()", dt));
  }
}

TEST(CudaBinary, LargeOddAndMisaligned) {
  THD_REQUIRE_CUDA();
  const int64_t n = (int64_t{1} << 20) + 3;
  for (DType dt : {kFloat32, kFloat16, kUInt8, kFloat64, kBool}) {
    const std::string what = std::string(dtype_name(dt));
    // Aligned, and every operand one element past alignment (head and tail).
    expect_same_as_cpu(
        {random_cpu({n}, dt), random_cpu({n}, dt)},
        [](std::vector<Tensor>& t) { return t[0].maximum(t[1]); }, what);
    expect_same_as_cpu(
        {random_cpu({n + 1}, dt), random_cpu({n + 1}, dt)},
        [](std::vector<Tensor>& t) {
          Tensor a = t[0].slice(0, 1, n + 1);
          a.add_(t[1].slice(0, 1, n + 1));
          return t[0];
        },
        what + " offset 1 in place");
    // Inputs misaligned against a fresh output: no common alignment.
    expect_same_as_cpu(
        {random_cpu({n + 1}, dt), random_cpu({n + 2}, dt)},
        [&](std::vector<Tensor>& t) {
          return t[0].slice(0, 1, n + 1).minimum(t[1].slice(0, 2, n + 2));
        },
        what + " offsets 1 and 2");
  }
}

TEST(CudaBinary, IntegerPowExponents) {
  THD_REQUIRE_CUDA();
  for (DType dt : {kUInt8, kInt8, kInt32, kInt64}) {
    Tensor base = random_cpu({300}, dt);
    Tensor exponent = Tensor::randint(0, 12, {300}, kInt64).to(dt);
    expect_same_as_cpu(
        {base, exponent}, [](std::vector<Tensor>& t) { return t[0].pow(t[1]); }, named("pow", dt));
    expect_same_as_cpu(
        {base}, [](std::vector<Tensor>& t) { return t[0].pow(3); }, named("pow 3", dt));
    // Negative exponents: ValueError on both (for uint8, -1 wraps to 255 on both).
    expect_same_as_cpu(
        {base}, [](std::vector<Tensor>& t) { return t[0].pow(-1); }, named("pow -1", dt));
    Tensor negative = exponent.clone();
    negative.slice(0, 150, 151).fill_(-1);
    expect_same_as_cpu(
        {base, negative}, [](std::vector<Tensor>& t) { return t[0].pow(t[1]); },
        named("pow negative element", dt));
  }
}

TEST(CudaBinary, SpecialFloatValues) {
  THD_REQUIRE_CUDA();
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> values = {nan, inf, -inf, 0.0, -0.0, 1.0, -1.5, 1e30, 1e-30, 2.0};
  std::vector<double> a;
  std::vector<double> b;
  for (double x : values) {
    for (double y : values) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    Tensor ta = Tensor::from_vector(a).to(dt);
    Tensor tb = Tensor::from_vector(b).to(dt);
    for (const BinaryOp& op : binary_ops()) {
      expect_same_as_cpu(
          {ta, tb}, [&](std::vector<Tensor>& t) { return op.tensor_tensor(t[0], t[1]); },
          named(op.name, dt) + " special values");
    }
  }
}

TEST(CudaBinary, Errors) {
  THD_REQUIRE_CUDA();
  Tensor g = Tensor::ones({3}, kFloat32, Device::cuda(0));
  Tensor c = Tensor::ones({3}, kFloat32);
  Tensor c0 = Tensor::ones({}, kFloat32);
  // Mixed devices, either way round, also a CPU 0-dim tensor.
  EXPECT_THROW(g + c, ValueError);
  EXPECT_THROW(c + g, ValueError);
  EXPECT_THROW(g * c0, ValueError);
  EXPECT_THROW(c0 * g, ValueError);
  EXPECT_THROW(g.add_(c), ValueError);
  EXPECT_THROW(c.add_(g), ValueError);
  EXPECT_THROW(g.maximum(c), ValueError);
  EXPECT_THROW(g.pow(c0), ValueError);
  // The CPU's errors, on the GPU too.
  Tensor gb = Tensor::ones({3}, kBool, Device::cuda(0));
  EXPECT_THROW(gb - gb, TypeError);
  EXPECT_THROW(g + Tensor::ones({4}, kFloat32, Device::cuda(0)), ShapeError);
  Tensor gi = Tensor::ones({3}, kInt32, Device::cuda(0));
  EXPECT_THROW(gi.add_(g), TypeError);
  EXPECT_THROW(gi.div_(2), TypeError);
  EXPECT_THROW(g.expand({2, 3}).add_(1), ValueError);
  EXPECT_THROW(Tensor() + g, Error);
}

}  // namespace
}  // namespace thd
