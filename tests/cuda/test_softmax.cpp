// CUDA softmax / log_softmax against the CPU's, along every dim (the row kernel when
// the dim is innermost, the column kernel otherwise, split launches for few long
// columns), for every floating dtype, with NaN, inf and all--inf rows.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <thd/tensor.h>

#include "cuda_test_util.h"

namespace thd::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

void expect_softmax_same(const Tensor& cpu_in, int64_t dim, const std::string& what) {
  const auto [rtol, atol] = tolerance_for(cpu_in.dtype());
  for (bool log : {false, true}) {
    SCOPED_TRACE(what + (log ? " log_softmax" : " softmax") + " dim " + std::to_string(dim));
    const Tensor want = log ? cpu_in.log_softmax(dim) : cpu_in.softmax(dim);
    const Tensor gpu_in = cpu_in.cuda();
    const Tensor got = log ? gpu_in.log_softmax(dim) : gpu_in.softmax(dim);
    expect_matches_cpu(got, want, rtol, atol);
  }
}

TEST(CudaSoftmax, EveryDimAndFloatDtype) {
  THD_REQUIRE_CUDA();
  const std::vector<Shape> shapes = {{5},       {3, 7},       {4, 5, 6},    {2, 3, 1025},
                                     {2, 1030, 3}, {33, 2, 1}, {1, 1, 1}, {3, 0, 4}};
  for (DType dt : {kFloat16, kBFloat16, kFloat32, kFloat64}) {
    for (const Shape& shape : shapes) {
      // Scaled so that exp(x) alone would overflow: only the max subtraction saves it.
      const Tensor t = random_cpu(shape, dt).mul(30).to(dt);
      for (int64_t dim = -static_cast<int64_t>(shape.size()); dim < static_cast<int64_t>(shape.size());
           ++dim) {
        expect_softmax_same(t, dim, std::string(dtype_name(dt)) + " " + shape_str(shape));
      }
    }
    expect_softmax_same(random_cpu({}, dt), 0, "0-dim");
    expect_softmax_same(random_cpu({}, dt), -1, "0-dim");
  }
}

TEST(CudaSoftmax, NonContiguousInputs) {
  THD_REQUIRE_CUDA();
  const Tensor t = random_cpu({6, 40, 9}, kFloat32);
  for (int64_t dim = 0; dim < 3; ++dim) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    const Tensor g = t.cuda();
    expect_matches_cpu(g.transpose(0, 2).softmax(dim), t.transpose(0, 2).softmax(dim));
    expect_matches_cpu(g.slice(1, 1, 40, 3).log_softmax(dim), t.slice(1, 1, 40, 3).log_softmax(dim));
    expect_matches_cpu(g.slice(1, 0, 1).expand({6, 5, 9}).softmax(dim),
                       t.slice(1, 0, 1).expand({6, 5, 9}).softmax(dim));
  }
}

TEST(CudaSoftmax, NaNInfAndRowsOfMinusInf) {
  THD_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kFloat16, kFloat64}) {
    // Row 0 all -inf, row 1 one NaN, row 2 one +inf, row 3 some -inf among finite
    // values, row 4 -inf first then finite, row 5 plain.
    std::vector<double> v(6 * 50);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 11) - 5;
    for (size_t k = 0; k < 50; ++k) v[k] = -kInf;
    v[50 + 20] = kNaN;
    v[100 + 33] = kInf;
    for (size_t k = 0; k < 50; k += 3) v[150 + k] = -kInf;
    for (size_t k = 0; k < 25; ++k) v[200 + k] = -kInf;
    const Tensor t = Tensor::from_vector<double>(v, {6, 50}).to(dt);
    expect_softmax_same(t, 1, "special rows");
    expect_softmax_same(t.t().contiguous(), 0, "special columns");
    expect_softmax_same(t, 0, "across rows");
  }
}

// Long rows and columns, and few of them: the split launches.
TEST(CudaSoftmax, LongRowsAndColumns) {
  THD_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kBFloat16}) {
    const std::string d(dtype_name(dt));
    expect_softmax_same(random_cpu({2, 300001}, dt), 1, d + " 2 long rows");
    expect_softmax_same(random_cpu({300001, 2}, dt), 0, d + " 2 long columns");
    expect_softmax_same(random_cpu({1 << 22}, dt), 0, d + " one 4M row");
    expect_softmax_same(random_cpu({4096, 515}, dt), 1, d + " many rows");
    expect_softmax_same(random_cpu({515, 4096}, dt), 0, d + " many columns");
  }
}

}  // namespace
}  // namespace thd::testing
