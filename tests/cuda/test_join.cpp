// cat and stack of CUDA tensors against the CPU ops: every dtype and dim, mixed dtypes
// (promoted as on the CPU), non-contiguous inputs, torch's skipped 1-D empty tensors,
// and the ValueError of inputs on different devices.
#include <gtest/gtest.h>

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

void expect_exact(const Tensor& gpu, const Tensor& cpu) { expect_matches_cpu(gpu, cpu, 0, 0); }

std::vector<Tensor> to_cuda(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.cuda());
  return out;
}

void check_cat(const std::vector<Tensor>& cpu, const std::vector<Tensor>& gpu, int64_t dim) {
  SCOPED_TRACE("cat of " + std::to_string(cpu.size()) + " along " + std::to_string(dim) +
               ", first " + shape_str(cpu[0].shape()) + " " +
               std::string(dtype_name(cpu[0].dtype())));
  const Tensor want = cat(cpu, dim);
  (void)poisoned_cuda(want.shape(), want.dtype());
  expect_exact(cat(gpu, dim), want);
}
void check_cat(const std::vector<Tensor>& cpu, int64_t dim) { check_cat(cpu, to_cuda(cpu), dim); }

void check_stack(const std::vector<Tensor>& cpu, const std::vector<Tensor>& gpu, int64_t dim) {
  SCOPED_TRACE("stack of " + std::to_string(cpu.size()) + " along " + std::to_string(dim) +
               ", first " + shape_str(cpu[0].shape()) + " " +
               std::string(dtype_name(cpu[0].dtype())));
  const Tensor want = stack(cpu, dim);
  (void)poisoned_cuda(want.shape(), want.dtype());
  expect_exact(stack(gpu, dim), want);
}
void check_stack(const std::vector<Tensor>& cpu, int64_t dim) {
  check_stack(cpu, to_cuda(cpu), dim);
}

TEST(CudaCat, EveryDTypeAndDim) {
  THD_REQUIRE_CUDA();
  for (DType dt : kAll) {
    for (int64_t dim : {0, 1, 2, -1}) {
      Shape a = {2, 3, 4}, b = a, c = a;
      b[dim < 0 ? dim + 3 : dim] = 5;
      c[dim < 0 ? dim + 3 : dim] = 1;
      check_cat({random_cpu(a, dt), random_cpu(b, dt), random_cpu(c, dt)}, dim);
    }
  }
}

TEST(CudaCat, MixedDTypesViewsAndEmpties) {
  THD_REQUIRE_CUDA();
  // Promoted as on the CPU: int32 + float16 + bool -> float16.
  check_cat({random_cpu({2, 3}, kInt32), random_cpu({4, 3}, kFloat16), random_cpu({1, 3}, kBool)},
            0);
  check_cat({random_cpu({3, 2}, kBFloat16), random_cpu({3, 5}, kFloat64)}, 1);
  // Transposed and strided inputs.
  const Tensor x = random_cpu({5, 6}, kFloat32), y = random_cpu({6, 9}, kFloat32);
  check_cat({x.t(), y.slice(1, 0, 9, 2)}, {x.cuda().t(), y.cuda().slice(1, 0, 9, 2)}, 1);
  check_cat({x.t(), y.t().t()}, {x.cuda().t(), y.cuda().t().t()}, 1);
  // torch's legacy rule: 1-D empty tensors join anything; only such gives [0].
  check_cat({random_cpu({0}, kInt64), random_cpu({2, 3}, kInt64), random_cpu({0}, kInt64)}, 1);
  check_cat({random_cpu({0}, kFloat32), random_cpu({0}, kFloat32)}, 0);
  // An empty piece along dim, and a large one.
  check_cat({random_cpu({0, 4}, kInt8), random_cpu({3, 4}, kInt8)}, 0);
  check_cat({random_cpu({1 << 18}, kFloat32), random_cpu({(1 << 18) + 1}, kFloat32)}, 0);
  // One input.
  check_cat({random_cpu({3, 3}, kUInt8)}, -1);
}

TEST(CudaStack, EveryDTypeAndDim) {
  THD_REQUIRE_CUDA();
  for (DType dt : kAll) {
    for (int64_t dim : {0, 1, 2, -1}) {
      check_stack({random_cpu({2, 3}, dt), random_cpu({2, 3}, dt), random_cpu({2, 3}, dt)}, dim);
    }
  }
  check_stack({random_cpu({}, kFloat64), random_cpu({}, kFloat64)}, 0);
  check_stack({random_cpu({4, 0}, kInt32), random_cpu({4, 0}, kInt32)}, 1);
  check_stack({random_cpu({3, 4}, kInt32), random_cpu({3, 4}, kFloat32)}, 2);
  const Tensor x = random_cpu({4, 5}, kFloat16), y = random_cpu({5, 4}, kFloat16);
  check_stack({x, y.t()}, {x.cuda(), y.cuda().t()}, 1);
}

TEST(CudaJoin, MixedDevicesRaise) {
  THD_REQUIRE_CUDA();
  const Tensor cpu = random_cpu({2, 3}, kFloat32);
  const Tensor gpu = cpu.cuda();
  EXPECT_THROW((void)cat({gpu, cpu}), ValueError);
  EXPECT_THROW((void)cat({cpu, gpu}), ValueError);
  EXPECT_THROW((void)cat({gpu, gpu, Tensor::empty({0}, kFloat32)}), ValueError);
  EXPECT_THROW((void)stack({gpu, cpu}), ValueError);
  EXPECT_THROW((void)stack({cpu, gpu}, 1), ValueError);
}

}  // namespace
}  // namespace thd
