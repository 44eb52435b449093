// arange, linspace and eye written into an existing tensor (tensor/into_creation.h):
// the allocating op's bytes; `out` untouched and false when it cannot be the
// result; the op's error, with `out` untouched, for arguments the op refuses.
#include <gtest/gtest.h>

#include <thd/error.h>
#include <thd/tensor.h>

#include "expect_throw.h"
#include "into_testing.h"
#include "tensor/into_creation.h"

namespace thd {
namespace {

using into_testing::refuses;
using into_testing::same_bytes;
using into_testing::writes;

TEST(IntoCreation, ArangeLinspaceAndEyeWriteWhatTheOpMakes) {
  EXPECT_TRUE(writes([](const Tensor& o) { return detail::arange_into(o, 3, 40, 3, std::nullopt); },
                     Tensor::arange(3, 40, 3)));
  EXPECT_TRUE(writes([](const Tensor& o) { return detail::arange_into(o, 10, -7, -4, kInt8); },
                     Tensor::arange(10, -7, -4, kInt8)));
  EXPECT_TRUE(writes([](const Tensor& o) { return detail::arange_into(o, -1.5, 2.5, 0.3, std::nullopt); },
                     Tensor::arange(-1.5, 2.5, 0.3)));
  EXPECT_TRUE(writes([](const Tensor& o) { return detail::arange_into(o, 0, 5, 1, kBFloat16); },
                     Tensor::arange(0, 5, 1, kBFloat16)));
  for (DType dt : {kFloat32, kFloat64, kInt32, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    for (int64_t steps : {1, 2, 7, 10}) {
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::linspace_into(o, -2.0, 5.0, steps, dt); },
                         Tensor::linspace(-2.0, 5.0, steps, dt)));
    }
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::eye_into(o, 4, -1, dt); }, Tensor::eye(4, -1, dt)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::eye_into(o, 3, 5, dt); }, Tensor::eye(3, 5, dt)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::eye_into(o, 5, 2, dt); }, Tensor::eye(5, 2, dt)));
  }
  EXPECT_TRUE(writes([](const Tensor& o) { return detail::eye_into(o, 3, 3, kBool); }, Tensor::eye(3, 3, kBool)));
}

TEST(IntoCreation, AnOutputThatCannotBeTheResultIsRefusedAndLeftAsItWas) {
  EXPECT_TRUE(refuses([](const Tensor& o) { return detail::arange_into(o, 0, 10, 1, std::nullopt); },
                      Tensor::zeros({10}, kInt32)));
  EXPECT_TRUE(refuses([](const Tensor& o) { return detail::arange_into(o, 0, 10, 1, std::nullopt); },
                      Tensor::zeros({9}, kInt64)));
  EXPECT_TRUE(refuses([](const Tensor& o) { return detail::arange_into(o, 0, 10, 1, std::nullopt); },
                      Tensor::zeros({20}, kInt64).slice(0, 0, 20, 2)));
  EXPECT_TRUE(refuses([](const Tensor& o) { return detail::linspace_into(o, 0, 1, 5, kFloat32); },
                      Tensor::zeros({5}, kFloat64)));
  EXPECT_TRUE(refuses([](const Tensor& o) { return detail::linspace_into(o, 0, 1, 5, kFloat32); },
                      Tensor::zeros({1, 5}, kFloat32)));
  EXPECT_TRUE(refuses([](const Tensor& o) { return detail::eye_into(o, 3, 4, kFloat32); }, Tensor::zeros({4, 3}, kFloat32)));
  EXPECT_TRUE(refuses([](const Tensor& o) { return detail::eye_into(o, 3, 3, kFloat32); },
                      Tensor::zeros({3, 6}, kFloat32).slice(1, 0, 6, 2)));
}

TEST(IntoCreation, ArgumentsTheOpRefusesRaiseItsErrorAndLeaveTheOutputAsItWas) {
  Tensor out = Tensor::full({4}, 7, kInt64);
  const Tensor before = out.clone();
  THD_EXPECT_THROW_MSG(detail::arange_into(out, 0, 4, 0, std::nullopt), ValueError, "step must be nonzero");
  THD_EXPECT_THROW_MSG(detail::arange_into(out, 4, 0, 1, std::nullopt), ValueError,
                       "upper bound and larger bound inconsistent with step sign");
  THD_EXPECT_THROW_MSG(detail::linspace_into(out, 0, 1, -1, kInt64), ValueError,
                       "number of steps must be non-negative, got -1");
  THD_EXPECT_THROW_MSG(detail::eye_into(out, -2, 2, kInt64), ValueError, "n must be non-negative, got -2");
  EXPECT_TRUE(same_bytes(out, before));
}

}  // namespace
}  // namespace thd
