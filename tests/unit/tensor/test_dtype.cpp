#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <thd/tensor.h>

#include "tensor/reference.h"

namespace thd {
namespace {

TEST(DType, NamesAndSizes) {
  EXPECT_EQ(dtype_name(kFloat32), "float32");
  EXPECT_EQ(dtype_name(kBFloat16), "bfloat16");
  EXPECT_EQ(element_size(kFloat16), 2u);
  EXPECT_EQ(element_size(kInt64), 8u);
  EXPECT_EQ(element_size(kBool), 1u);
  EXPECT_TRUE(is_floating_point(kBFloat16));
  EXPECT_FALSE(is_floating_point(kInt32));
  EXPECT_FALSE(is_integral(kBool));
  EXPECT_TRUE(is_integral(kBool, true));
}

TEST(DType, PromoteTypes) {
  EXPECT_EQ(promote_types(kBool, kInt8), kInt8);
  EXPECT_EQ(promote_types(kUInt8, kInt8), kInt32);
  EXPECT_EQ(promote_types(kInt32, kInt64), kInt64);
  EXPECT_EQ(promote_types(kInt64, kFloat16), kFloat16);
  EXPECT_EQ(promote_types(kFloat16, kBFloat16), kFloat32);
  EXPECT_EQ(promote_types(kFloat32, kFloat64), kFloat64);
  EXPECT_EQ(promote_types(kBFloat16, kFloat32), kFloat32);
  // Symmetric for every pair.
  for (DType a : test::all_dtypes()) {
    for (DType b : test::all_dtypes()) EXPECT_EQ(promote_types(a, b), promote_types(b, a));
  }
}

TEST(DType, ResultTypeFollowsTorchCategories) {
  Tensor i32 = Tensor::zeros({3}, kInt32);
  Tensor f16 = Tensor::zeros({3}, kFloat16);
  EXPECT_EQ(result_type(i32, Scalar(2)), kInt32);      // int scalar keeps the tensor's type
  EXPECT_EQ(result_type(i32, Scalar(2.5)), kFloat32);  // float scalar: default float
  EXPECT_EQ(result_type(f16, Scalar(2.5)), kFloat16);
  EXPECT_EQ(result_type(Tensor::zeros({3}, kBool), Scalar(2)), kInt64);
  // A 0-dim tensor of the same category does not widen a dimensioned one.
  EXPECT_EQ(result_type(i32, Tensor::zeros({}, kInt64)), kInt32);
  EXPECT_EQ(result_type(i32, Tensor::zeros({}, kFloat64)), kFloat64);
  EXPECT_EQ(result_type(f16, Tensor::zeros({}, kFloat64)), kFloat16);
  EXPECT_EQ(result_type(i32, Tensor::zeros({3}, kInt64)), kInt64);
}

TEST(Half, RoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    Half h = Half::from_bits(static_cast<uint16_t>(bits));
    float f = h;
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(Half(f))));
      continue;
    }
    EXPECT_EQ(Half(f).bits, bits) << "bits " << bits;
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(static_cast<float>(Half(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(Half(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(65520.0f))));
  EXPECT_EQ(static_cast<float>(Half(65519.0f)), 65504.0f);
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties go to even (1).
  EXPECT_EQ(static_cast<float>(Half(1.0f + std::ldexp(1.0f, -11))), 1.0f);
  EXPECT_EQ(static_cast<float>(Half(1.0f + 3 * std::ldexp(1.0f, -11))), 1.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(static_cast<float>(Half(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));
  EXPECT_EQ(static_cast<float>(Half(std::ldexp(1.0f, -26))), 0.0f);
  EXPECT_EQ(static_cast<float>(Half(-2.5f)), -2.5f);
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(3.0f)), 3.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even.
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(static_cast<float>(BFloat16(std::numeric_limits<float>::infinity()))));
}

TEST(Error, CarriesOpAndLocation) {
  try {
    Tensor::zeros({2, 3}).view({4});
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_EQ(e.context().op, "view");
    EXPECT_NE(std::string(e.what()).find("view: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[4]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tensor/"), std::string::npos) << e.what();
  }
  Error plain("boom", ErrorContext{.op = "all_reduce", .rank = 2, .node = 1, .peer = 3});
  EXPECT_STREQ(plain.what(), "all_reduce: boom [node 1, rank 2, peer 3]");
}

}  // namespace
}  // namespace thd
