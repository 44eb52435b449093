// Elementwise ops run on a worker give what the local tensor library gives: binary
// ops and operators (tensor and scalar operands, broadcasting, type promotion), their
// in-place forms, unary math, clamp, comparisons, dtype conversion, fill_ and copy_.
#include <gtest/gtest.h>

#include <thd/distributed.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class RemoteElementwise : public JobTest<2> {};

// Exponents every dtype can raise to without a data-dependent error.
Tensor small_exponents(const Shape& shape, DType dtype) {
  std::vector<double> v(static_cast<size_t>(numel_of(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 3);
  return make(shape, dtype, v);
}

TEST_F(RemoteElementwise, BinaryOpsAndOperators) {
  for (DType dt : checked_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({3, 4}, dt, 1);
    const Tensor row = sample_tensor({4}, dt, 2, /*positive=*/true);
    const Tensor col = sample_tensor({3, 1}, dt, 3, /*positive=*/true);
    expect_remote_matches("add", [](auto x, auto y) { return x.add(y); }, a, row);
    expect_remote_matches("sub", [](auto x, auto y) { return x.sub(y); }, a, col);
    expect_remote_matches("mul", [](auto x, auto y) { return x.mul(y); }, col, row);
    expect_remote_matches("div", [](auto x, auto y) { return x.div(y); }, a, row);
    expect_remote_matches("pow", [](auto x, auto y) { return x.pow(y); }, a, small_exponents({4}, dt));
    expect_remote_matches("maximum", [](auto x, auto y) { return x.maximum(y); }, a, row);
    expect_remote_matches("minimum", [](auto x, auto y) { return x.minimum(y); }, col, a);
    expect_remote_matches("operator+", [](auto x, auto y) { return x + y; }, a, row);
    expect_remote_matches("operator-", [](auto x, auto y) { return x - y; }, a, col);
    expect_remote_matches("operator*", [](auto x, auto y) { return x * y; }, a, a);
    expect_remote_matches("operator/", [](auto x, auto y) { return x / y; }, a, col);
    expect_remote_matches("unary operator-", [](auto x) { return -x; }, a);
  }
}

TEST_F(RemoteElementwise, ScalarOperands) {
  for (DType dt : checked_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({2, 5}, dt, 4, /*positive=*/true);
    expect_remote_matches("add(int)", [](auto x) { return x.add(3); }, a);
    expect_remote_matches("add(double)", [](auto x) { return x.add(1.5); }, a);  // ints promote
    expect_remote_matches("sub(int)", [](auto x) { return x.sub(2); }, a);
    expect_remote_matches("mul(double)", [](auto x) { return x.mul(-0.25); }, a);
    expect_remote_matches("div(int)", [](auto x) { return x.div(4); }, a);
    expect_remote_matches("pow(int)", [](auto x) { return x.pow(2); }, a);
    expect_remote_matches("pow(double)", [](auto x) { return x.pow(0.5); }, a);
    expect_remote_matches("tensor + scalar", [](auto x) { return x + 2; }, a);
    expect_remote_matches("tensor - scalar", [](auto x) { return x - 1.5; }, a);
    expect_remote_matches("tensor * scalar", [](auto x) { return x * 3; }, a);
    expect_remote_matches("tensor / scalar", [](auto x) { return x / 2.0; }, a);
    expect_remote_matches("scalar + tensor", [](auto x) { return 2 + x; }, a);
    expect_remote_matches("scalar - tensor", [](auto x) { return 10 - x; }, a);
    expect_remote_matches("scalar * tensor", [](auto x) { return 0.5 * x; }, a);
    expect_remote_matches("scalar / tensor", [](auto x) { return 1 / x; }, a);
    expect_remote_matches("add(bool)", [](auto x) { return x.add(true); }, a);
  }
}

TEST_F(RemoteElementwise, TypePromotionAcrossDtypes) {
  const std::vector<std::pair<DType, DType>> pairs = {
      {kInt32, kFloat32}, {kInt64, kUInt8},    {kUInt8, kInt8},     {kFloat16, kBFloat16},
      {kBool, kInt32},    {kFloat32, kFloat64}, {kInt64, kFloat16}, {kBool, kBool}};
  for (auto [da, db] : pairs) {
    SCOPED_TRACE(std::string(dtype_name(da)) + " with " + std::string(dtype_name(db)));
    const Tensor a = sample_tensor({2, 3}, da, 5);
    const Tensor b = sample_tensor({3}, db, 6, /*positive=*/true);
    expect_remote_matches("add", [](auto x, auto y) { return x + y; }, a, b);
    expect_remote_matches("mul", [](auto x, auto y) { return x * y; }, a, b);
    expect_remote_matches("div", [](auto x, auto y) { return x / y; }, a, b);
    expect_remote_matches("maximum", [](auto x, auto y) { return x.maximum(y); }, a, b);
    expect_remote_matches("eq", [](auto x, auto y) { return x.eq(y); }, a, b);
  }
}

// What add_/sub_/mul_/div_ of a number accept depends on the dtypes alone, and the
// master remembers it; a refused call is refused every time, and pow_'s exponent is
// checked by its value on every call.
TEST_F(RemoteElementwise, InPlaceNumberChecksHoldOnEveryCall) {
  DistributedTensor x = DistributedTensor::from(Tensor::ones({3}, kInt64));
  for (int i = 0; i < 3; ++i) {
    EXPECT_THROW(x.mul_(0.5), TypeError);
    x.mul_(2);
  }
  for (int i = 0; i < 2; ++i) {
    x.pow_(2);
    EXPECT_THROW(x.pow_(-1), ValueError);
  }
  EXPECT_EQ(x.get().to_vector<int64_t>(), std::vector<int64_t>(3, 4096));
  // What was remembered for these calls is not taken for another op's: int64 math
  // gives float32.
  for (const DistributedTensor& y : {x.exp(), x.sqrt(), x.sin(), x.cos(), x.tanh(), x.sigmoid(), x.rsqrt()}) {
    EXPECT_EQ(y.dtype(), kFloat32);
  }
}

TEST_F(RemoteElementwise, InPlaceBinaryForms) {
  for (DType dt : {kInt32, kInt64, kFloat32, kFloat64, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({3, 4}, dt, 7);
    const Tensor b = sample_tensor({4}, dt, 8, /*positive=*/true);
    expect_remote_matches("add_", [](auto x, auto y) { return x.add_(y); }, a, b);
    expect_remote_matches("sub_", [](auto x, auto y) { return x.sub_(y); }, a, b);
    expect_remote_matches("mul_", [](auto x, auto y) { return x.mul_(y); }, a, b);
    expect_remote_matches("div_", [](auto x, auto y) { return x.div_(y); }, a, b);  // int: a type error
    expect_remote_matches("pow_", [](auto x, auto y) { return x.pow_(y); }, a, small_exponents({4}, dt));
    expect_remote_matches("add_(scalar)", [](auto x) { return x.add_(5); }, a);
    expect_remote_matches("sub_(scalar)", [](auto x) { return x.sub_(2); }, a);
    expect_remote_matches("mul_(scalar)", [](auto x) { return x.mul_(-3); }, a);
    expect_remote_matches("div_(scalar)", [](auto x) { return x.div_(2); }, a);
    expect_remote_matches("pow_(scalar)", [](auto x) { return x.pow_(2); }, a);
    expect_remote_matches("mul_(double)", [](auto x) { return x.mul_(0.5); }, a);  // int: a type error
    expect_remote_matches("operator+=", [](auto x, auto y) { return x += y; }, a, b);
    expect_remote_matches("operator-=", [](auto x, auto y) { return x -= y; }, a, b);
    expect_remote_matches("operator*=", [](auto x, auto y) { return x *= y; }, a, b);
    expect_remote_matches("operator/=", [](auto x, auto y) { return x /= y; }, a, b);
    expect_remote_matches("operator+=(scalar)", [](auto x) { return x += 1; }, a);
    expect_remote_matches("operator-=(scalar)", [](auto x) { return x -= 1; }, a);
    expect_remote_matches("operator*=(scalar)", [](auto x) { return x *= 2; }, a);
    expect_remote_matches("operator/=(scalar)", [](auto x) { return x /= 4; }, a);
  }
  // The result of an in-place op is the same remote tensor, not a copy.
  const Tensor a = sample_tensor({4}, kFloat32, 9);
  DistributedTensor x = DistributedTensor::from(a);
  DistributedTensor& same = x.add_(1);
  EXPECT_EQ(&same, &x);
  EXPECT_EQ(same.id(), x.id());
  // Broadcasting self to the other's shape is not allowed in place.
  expect_remote_matches("add_ that would grow self", [](auto x, auto y) { return x.add_(y); },
                        sample_tensor({4}, kFloat32, 10), sample_tensor({3, 4}, kFloat32, 11));
}

TEST_F(RemoteElementwise, UnaryMath) {
  for (DType dt : {kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({3, 5}, dt, 12);
    const Tensor pos = sample_tensor({3, 5}, dt, 13, /*positive=*/true);
    expect_remote_matches("neg", [](auto x) { return x.neg(); }, a);
    expect_remote_matches("abs", [](auto x) { return x.abs(); }, a);
    expect_remote_matches("exp", [](auto x) { return x.exp(); }, a);
    expect_remote_matches("log", [](auto x) { return x.log(); }, pos);
    expect_remote_matches("log of negatives (nan)", [](auto x) { return x.log(); }, a);
    expect_remote_matches("sqrt", [](auto x) { return x.sqrt(); }, pos);
    expect_remote_matches("rsqrt", [](auto x) { return x.rsqrt(); }, pos);
    expect_remote_matches("sin", [](auto x) { return x.sin(); }, a);
    expect_remote_matches("cos", [](auto x) { return x.cos(); }, a);
    expect_remote_matches("tanh", [](auto x) { return x.tanh(); }, a);
    expect_remote_matches("sigmoid", [](auto x) { return x.sigmoid(); }, a);
    expect_remote_matches("relu", [](auto x) { return x.relu(); }, a);
    expect_remote_matches("gelu", [](auto x) { return x.gelu(); }, a);
    // In place: the integer dtypes cannot hold the float functions' results.
    expect_remote_matches("neg_", [](auto x) { return x.neg_(); }, a);
    expect_remote_matches("abs_", [](auto x) { return x.abs_(); }, a);
    expect_remote_matches("exp_", [](auto x) { return x.exp_(); }, a);
    expect_remote_matches("log_", [](auto x) { return x.log_(); }, pos);
    expect_remote_matches("sqrt_", [](auto x) { return x.sqrt_(); }, pos);
    expect_remote_matches("rsqrt_", [](auto x) { return x.rsqrt_(); }, pos);
    expect_remote_matches("sin_", [](auto x) { return x.sin_(); }, a);
    expect_remote_matches("cos_", [](auto x) { return x.cos_(); }, a);
    expect_remote_matches("tanh_", [](auto x) { return x.tanh_(); }, a);
    expect_remote_matches("sigmoid_", [](auto x) { return x.sigmoid_(); }, a);
    expect_remote_matches("relu_", [](auto x) { return x.relu_(); }, a);
    expect_remote_matches("gelu_", [](auto x) { return x.gelu_(); }, a);
  }
}

TEST_F(RemoteElementwise, Clamp) {
  for (DType dt : {kUInt8, kInt32, kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({4, 4}, dt, 14);
    expect_remote_matches("clamp(min, max)", [](auto x) { return x.clamp(-2, 3); }, a);
    expect_remote_matches("clamp(min)", [](auto x) { return x.clamp(1, std::nullopt); }, a);
    expect_remote_matches("clamp(max)", [](auto x) { return x.clamp(std::nullopt, 2.5); }, a);
    expect_remote_matches("clamp(min > max)", [](auto x) { return x.clamp(4, 1); }, a);
    expect_remote_matches("clamp_", [](auto x) { return x.clamp_(0, 5); }, a);
    expect_remote_matches("clamp_(max)", [](auto x) { return x.clamp_(std::nullopt, 1); }, a);
  }
}

TEST_F(RemoteElementwise, Comparisons) {
  for (DType dt : {kBool, kUInt8, kInt64, kFloat16, kFloat32}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({3, 4}, dt, 15);
    const Tensor b = sample_tensor({4}, dt, 16);
    expect_remote_matches("eq", [](auto x, auto y) { return x.eq(y); }, a, b);
    expect_remote_matches("ne", [](auto x, auto y) { return x.ne(y); }, a, b);
    expect_remote_matches("lt", [](auto x, auto y) { return x.lt(y); }, a, b);
    expect_remote_matches("le", [](auto x, auto y) { return x.le(y); }, a, b);
    expect_remote_matches("gt", [](auto x, auto y) { return x.gt(y); }, a, b);
    expect_remote_matches("ge", [](auto x, auto y) { return x.ge(y); }, a, b);
    expect_remote_matches("eq(scalar)", [](auto x) { return x.eq(1); }, a);
    expect_remote_matches("ne(scalar)", [](auto x) { return x.ne(0); }, a);
    expect_remote_matches("lt(scalar)", [](auto x) { return x.lt(2.5); }, a);
    expect_remote_matches("le(scalar)", [](auto x) { return x.le(-1); }, a);
    expect_remote_matches("gt(scalar)", [](auto x) { return x.gt(0); }, a);
    expect_remote_matches("ge(scalar)", [](auto x) { return x.ge(3); }, a);
  }
}

TEST_F(RemoteElementwise, ConversionsFillAndCopy) {
  const std::vector<DType> dtypes = {kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};
  for (DType from : dtypes) {
    const Tensor a = sample_tensor({2, 3}, from, 17);
    for (DType to : dtypes) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      expect_remote_matches("to(dtype)", [to](auto x) { return x.to(to); }, a);
      expect_remote_matches("to(dtype, copy)", [to](auto x) { return x.to(to, true); }, a);
    }
  }
  for (DType dt : {kBool, kInt32, kFloat16, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({3, 4}, dt, 18);
    expect_remote_matches("fill_(int)", [](auto x) { return x.fill_(7); }, a);
    expect_remote_matches("fill_(double)", [](auto x) { return x.fill_(-2.5); }, a);
    expect_remote_matches("fill_(bool)", [](auto x) { return x.fill_(true); }, a);
    // copy_ broadcasts the source and converts it to self's dtype.
    expect_remote_matches("copy_", [](auto x, auto y) { return x.copy_(y); }, a,
                          sample_tensor({3, 4}, kFloat32, 19));
    expect_remote_matches("copy_ (broadcast)", [](auto x, auto y) { return x.copy_(y); }, a,
                          sample_tensor({4}, kInt64, 20));
    expect_remote_matches("copy_ (bad shape)", [](auto x, auto y) { return x.copy_(y); }, a,
                          sample_tensor({5}, kInt64, 21));
  }
}

}  // namespace
}  // namespace thd::test
