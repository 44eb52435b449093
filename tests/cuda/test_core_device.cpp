// Devices, streams and device guards; device errors.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <thread>

#include <thd/cuda.h>
#include <thd/memory.h>
#include <thd/tensor.h>

#include "cuda_test_util.h"
#include "tensor/cuda/cuda_stream.h"

namespace thd {
namespace {

using testing::OwnedStream;

int current_device() {
  int d = -1;
  EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
  return d;
}

TEST(CudaDevice, CountsTheGpus) {
  THD_REQUIRE_CUDA();
  EXPECT_GE(cuda::device_count(), 1);
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(cuda::device_count(), n);
  EXPECT_TRUE(cuda::is_available());
  EXPECT_NO_THROW(cuda::synchronize());
  EXPECT_NO_THROW(cuda::synchronize(0));
  EXPECT_THROW(cuda::synchronize(n), ValueError);
}

TEST(CudaDevice, IndexOutOfRangeIsAValueError) {
  THD_REQUIRE_CUDA();
  const int n = cuda::device_count();
  const std::string want = "device cuda:" + std::to_string(n) + " is out of range (" +
                           std::to_string(n) + " CUDA devices)";
  try {
    Tensor::empty({2}, kFloat32, Device::cuda(n));
    ADD_FAILURE() << "no error for cuda:" << n;
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tensor::zeros({2}, kFloat32, Device::cuda(-1)), ValueError);
  EXPECT_THROW(Tensor::ones({2}, kFloat32, Device::cuda(n + 3)), ValueError);
  EXPECT_THROW(Tensor::ones({2}).to(Device::cuda(n)), ValueError);
  EXPECT_THROW(memory_stats(Device::cuda(n)), ValueError);
  EXPECT_THROW(empty_cache(Device::cuda(n)), ValueError);
  EXPECT_THROW(reset_peak_memory_stats(Device::cuda(-2)), ValueError);
}

TEST(CudaStream, DefaultIsTheLegacyStreamOnEveryThread) {
  THD_REQUIRE_CUDA();
  EXPECT_EQ(cuda::current_stream(0), nullptr);
  OwnedStream s;
  cuda::StreamGuard guard(0, s.get());
  cudaStream_t seen_elsewhere = s.get();
  std::thread other([&] { seen_elsewhere = cuda::current_stream(0); });
  other.join();
  EXPECT_EQ(seen_elsewhere, nullptr);  // the current stream is per thread
  EXPECT_EQ(cuda::current_stream(0), s.get());
}

TEST(CudaStream, StreamGuardsNestAndRestore) {
  THD_REQUIRE_CUDA();
  const int last = cuda::device_count() - 1;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  OwnedStream a, b;
  {
    cuda::StreamGuard outer(0, a.get());
    EXPECT_EQ(cuda::current_stream(0), a.get());
    {
      cuda::StreamGuard inner(0, b.get());
      EXPECT_EQ(cuda::current_stream(0), b.get());
    }
    EXPECT_EQ(cuda::current_stream(0), a.get());
    {
      cuda::StreamGuard elsewhere(last, nullptr);
      EXPECT_EQ(current_device(), last);
      EXPECT_EQ(cuda::current_stream(last), nullptr);
    }
    EXPECT_EQ(current_device(), 0);
  }
  EXPECT_EQ(cuda::current_stream(0), nullptr);
  EXPECT_EQ(current_device(), 0);
  EXPECT_THROW(cuda::current_stream(-1), ValueError);
}

TEST(CudaStream, DeviceGuardRestores) {
  THD_REQUIRE_CUDA();
  const int last = cuda::device_count() - 1;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  {
    cuda::DeviceGuard guard(last);
    EXPECT_EQ(current_device(), last);
    {
      cuda::DeviceGuard same(last);  // already current: nothing to switch
      EXPECT_EQ(current_device(), last);
    }
    EXPECT_EQ(current_device(), last);
  }
  EXPECT_EQ(current_device(), 0);
  EXPECT_THROW(cuda::DeviceGuard(cuda::device_count()), CudaError);
  EXPECT_EQ(current_device(), 0);
}

// Ops issued under a StreamGuard run on its stream: a stream other than the legacy
// one gives the same results once synchronized.
TEST(CudaStream, OpsRunOnTheCurrentStream) {
  THD_REQUIRE_CUDA();
  OwnedStream s;
  Tensor t;
  {
    cuda::StreamGuard guard(0, s.get());
    t = Tensor::full({1000, 3}, 2.5, kFloat32, Device::cuda(0));
    Tensor z = Tensor::zeros({1000, 3}, kFloat32, Device::cuda(0));
    z.copy_(t);
    EXPECT_EQ(z.cpu().sum().item<double>(), 7500.0);  // cpu() waits for stream s
  }
  ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
  EXPECT_EQ(t.cpu().to_vector<float>(), std::vector<float>(3000, 2.5f));
}

}  // namespace
}  // namespace thd
