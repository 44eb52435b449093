// sort and topk on CUDA tensors against the CPU ops: every dtype, every dim, one line
// and many (each path of the radix sort: line numbers packed into 32 or 64-bit keys,
// or a second pass by line for 64-bit dtypes), ties, NaN, infinities and -0 (the CPU
// sort is stable, so even the indices of equal values must match), descending, views,
// and topk's k = 0, 1, n and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <thd/tensor.h>

#include "cuda_test_util.h"

namespace thd {
namespace {

using testing::expect_matches_cpu;
using testing::poisoned_cuda;
using testing::random_cpu;

constexpr DType kAll[] = {kBool,    kUInt8,    kInt8,    kInt32,  kInt64,
                          kFloat16, kBFloat16, kFloat32, kFloat64};
constexpr DType kNumeric[] = {kUInt8,    kInt8,    kInt32,   kInt64,
                              kFloat16, kBFloat16, kFloat32, kFloat64};

void expect_exact(const Tensor& gpu, const Tensor& cpu) { expect_matches_cpu(gpu, cpu, 0, 0); }

void poison_next_output(const Shape& shape, DType dt) { (void)poisoned_cuda(shape, dt); }

std::string describe(const Tensor& t, int64_t dim) {
  return shape_str(t.shape()) + " strides " + shape_str(t.strides()) + " " +
         std::string(dtype_name(t.dtype())) + " dim " + std::to_string(dim);
}

// Values with many ties; for floats also -0 next to +0, NaN and both infinities.
Tensor tie_heavy(const Shape& shape, DType dt) {
  if (!is_floating_point(dt)) {
    return dt == kBool ? random_cpu(shape, kBool) : Tensor::randint(0, 4, shape, kInt64).to(dt);
  }
  Tensor t = Tensor::randint(-3, 3, shape, kInt64).to(dt);
  t.masked_fill_(random_cpu(shape, kBool), -0.0);
  t.masked_fill_(Tensor::randint(0, 8, shape, kInt64).eq(0), std::nan(""));
  t.masked_fill_(Tensor::randint(0, 16, shape, kInt64).eq(0),
                 std::numeric_limits<double>::infinity());
  t.masked_fill_(Tensor::randint(0, 16, shape, kInt64).eq(0),
                 -std::numeric_limits<double>::infinity());
  return t;
}

// cpu: the input on the CPU; gpu: the same values, on the GPU, with any strides.
void check_sort(const Tensor& cpu, const Tensor& gpu, int64_t dim) {
  for (bool descending : {false, true}) {
    SCOPED_TRACE(describe(gpu, dim) + (descending ? " descending" : " ascending"));
    const auto [want_values, want_indices] = cpu.sort(dim, descending);
    poison_next_output(cpu.shape(), kInt64);
    const auto [values, indices] = gpu.sort(dim, descending);
    expect_exact(indices, want_indices);
    expect_exact(values, want_values);
  }
}
void check_sort(const Tensor& cpu, int64_t dim) { check_sort(cpu, cpu.cuda(), dim); }

TEST(CudaSort, EveryDTypeAndDim) {
  THD_REQUIRE_CUDA();
  for (DType dt : kAll) {
    for (const Tensor& x : {random_cpu({6, 35, 9}, dt), tie_heavy({6, 35, 9}, dt)}) {
      for (int64_t dim : {0, 1, 2, -1}) check_sort(x, dim);
      // Non-contiguous: transposed, and every other element.
      check_sort(x.transpose(0, 2), x.cuda().transpose(0, 2), 1);
      check_sort(x.slice(1, 0, 35, 2), x.cuda().slice(1, 0, 35, 2), 1);
    }
  }
}

TEST(CudaSort, OneLineAndManyLines) {
  THD_REQUIRE_CUDA();
  for (DType dt : kAll) {
    // One long line (no line bits), many short ones (line numbers packed with the
    // keys in 32 or 64 bits, or sorted in a second pass for 64-bit dtypes).
    check_sort(tie_heavy({(1 << 17) + 3}, dt), 0);
    check_sort(random_cpu({20000, 7}, dt), 1);
    check_sort(tie_heavy({3, 70000}, dt), 0);
  }
  check_sort(tie_heavy({70001, 3}, kFloat16), 1);  // 16 key bits + 17 line bits
  check_sort(random_cpu({5, 1 << 16}, kFloat32), 1);
}

TEST(CudaSort, ExtremesAndEdgeShapes) {
  THD_REQUIRE_CUDA();
  const std::vector<int64_t> extremes = {INT64_MAX, 0, INT64_MIN, -1, 1, INT64_MIN + 1,
                                         INT64_MAX - 1, 0, INT64_MIN, 42};
  check_sort(Tensor::from_vector(extremes, {2, 5}), 1);
  check_sort(Tensor::from_vector(extremes, {2, 5}), 0);
  const std::vector<int32_t> extremes32 = {INT32_MAX, INT32_MIN, 0, -1, 1, INT32_MIN, 7};
  check_sort(Tensor::from_vector(extremes32), 0);
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> specials = {nan, -0.0, 1.0, -inf, 0.0, inf, nan, -0.0, -1e-300, 5e-324};
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    check_sort(Tensor::from_vector(specials).to(dt), 0);
  }
  // 0-dim, empty, a size-1 dim.
  check_sort(random_cpu({}, kFloat32), 0);
  check_sort(random_cpu({0, 5}, kInt32), 1);
  check_sort(random_cpu({0, 5}, kInt32), 0);
  check_sort(random_cpu({5, 1}, kBFloat16), 1);
}

// ---- topk ---------------------------------------------------------------------------

void check_topk(const Tensor& cpu, const Tensor& gpu, int64_t k, int64_t dim) {
  for (bool largest : {true, false}) {
    SCOPED_TRACE(describe(gpu, dim) + " k " + std::to_string(k) +
                 (largest ? " largest" : " smallest"));
    const auto [want_values, want_indices] = cpu.topk(k, dim, largest, true);
    const auto [values, indices] = gpu.topk(k, dim, largest, true);
    expect_exact(indices, want_indices);
    expect_exact(values, want_values);
    // Unsorted, the order is unspecified but the chosen elements are the CPU's.
    const auto [u_values, u_indices] = gpu.topk(k, dim, largest, false);
    const auto [cu_values, cu_indices] = cpu.topk(k, dim, largest, false);
    ASSERT_EQ(u_indices.shape(), cu_indices.shape());
    const Tensor got = u_indices.cpu();
    if (got.dim() > 0) {
      expect_exact(got.sort(dim).first.cuda(), cu_indices.sort(dim).first);
      expect_exact(u_values, cpu.gather(dim, got));
    }
  }
}
void check_topk(const Tensor& cpu, int64_t k, int64_t dim) { check_topk(cpu, cpu.cuda(), k, dim); }

TEST(CudaTopk, EveryDTypeKAndDim) {
  THD_REQUIRE_CUDA();
  for (DType dt : kNumeric) {
    for (const Tensor& x : {random_cpu({7, 40, 5}, dt), tie_heavy({7, 40, 5}, dt)}) {
      for (int64_t dim : {0, 1, -1}) {
        const int64_t n = x.size(dim);
        for (int64_t k : {int64_t{0}, int64_t{1}, n / 2, n}) check_topk(x, k, dim);
      }
      check_topk(x.transpose(0, 1), x.cuda().transpose(0, 1), 3, 0);
    }
  }
  check_topk(tie_heavy({3, 100000}, kFloat32), 10, 1);
  check_topk(random_cpu({}, kInt32), 1, 0);
  check_topk(random_cpu({}, kInt32), 0, 0);
}

TEST(CudaTopk, ErrorsMatchTheCpu) {
  THD_REQUIRE_CUDA();
  const Tensor x = random_cpu({4, 6}, kFloat32).cuda();
  EXPECT_THROW((void)x.topk(7, 1), IndexError);
  EXPECT_THROW((void)x.topk(-1, 1), IndexError);
  EXPECT_THROW((void)x.topk(2, 2), IndexError);
  EXPECT_THROW((void)x.to(kBool).topk(2, 1), TypeError);
  EXPECT_THROW((void)x.sort(3), IndexError);
}

}  // namespace
}  // namespace thd
