#include "cuda_test_util.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <random>
#include <utility>

namespace thd::testing {

Tensor random_cpu(const Shape& shape, DType dtype) {
  static std::mt19937_64 seeds{std::random_device{}()};
  Generator gen(seeds());
  if (is_floating_point(dtype)) return Tensor::randn(shape, kFloat32, &gen).to(dtype);
  if (dtype == kBool) return Tensor::randint(0, 2, shape, kInt64, &gen).to(kBool);
  if (dtype == kUInt8) return Tensor::randint(0, 100, shape, kInt64, &gen).to(dtype);
  return Tensor::randint(-50, 50, shape, kInt64, &gen).to(dtype);
}

Tensor poisoned_cuda(const Shape& shape, DType dtype, int device) {
  Tensor t = Tensor::empty(shape, dtype, Device::cuda(device));
  if (t.nbytes() > 0) {
    EXPECT_EQ(cudaMemset(t.data_ptr(), 0xFF, t.nbytes()), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  return t;
}

std::pair<double, double> tolerance_for(DType dtype) {
  switch (dtype) {
    case kFloat32: return {1e-5, 1e-6};
    case kFloat64: return {1e-12, 1e-12};
    case kFloat16: return {1e-3, 1e-3};
    case kBFloat16: return {1e-2, 1e-2};
    default: return {0, 0};
  }
}

void expect_matches_cpu(const Tensor& gpu, const Tensor& cpu, double rtol, double atol) {
  ASSERT_TRUE(gpu.device().is_cuda()) << "expected a CUDA result, got " << gpu.device();
  ASSERT_EQ(gpu.shape(), cpu.shape());
  ASSERT_EQ(gpu.dtype(), cpu.dtype());
  const auto [default_rtol, default_atol] = tolerance_for(cpu.dtype());
  if (rtol < 0) rtol = default_rtol;
  if (atol < 0) atol = default_atol;
  const std::vector<double> got = gpu.cpu().to_vector<double>();
  const std::vector<double> want = cpu.to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i];
    const double w = want[i];
    bool ok;
    if (std::isnan(w)) ok = std::isnan(g);
    else if (std::isinf(w)) ok = g == w;
    else ok = std::abs(g - w) <= rtol * std::abs(w) + atol;
    if (!ok && reported++ < 10) {
      ADD_FAILURE() << "element " << i << " (flat): cuda " << g << ", cpu " << w << " (rtol "
                    << rtol << ", atol " << atol << ", dtype " << cpu.dtype() << ")";
    }
  }
}

}  // namespace thd::testing
