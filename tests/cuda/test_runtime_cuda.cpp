// DistributedTensors on the workers' GPUs (needs a GPU; skips with "no CUDA device"
// elsewhere): creation on a device, uploads to it and downloads from it, ops there
// against the CPU's results, device moves and cross-device copy_, worker-to-worker
// copies and collectives of GPU tensors (staged through host memory), a GPU index a
// worker lacks, the session's device-memory limit and a real out-of-memory on the
// device (a RemoteError; the worker survives), and the memory thd::stats() reports.
// Both workers of the job run on this host and share its GPUs.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <string>

#include <thd/cuda.h>
#include <thd/distributed.h>

#include "cuda_job_fixture.h"
#include "cuda_test_util.h"

namespace thd::test {
namespace {

class RuntimeCuda : public CudaJobTest<2> {};

const Device kGpu = Device::cuda(0);

// A download of a GPU tensor against the CPU's result, within the dtype's tolerance.
::testing::AssertionResult close(const Tensor& got, const Tensor& want) {
  if (got.device() != Device::cpu()) return ::testing::AssertionFailure() << "get() gave a tensor on " << got.device();
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return ::testing::AssertionFailure() << "got " << got.dtype() << shape_str(got.shape()) << ", want "
                                         << want.dtype() << shape_str(want.shape());
  }
  const auto [rtol, atol] = testing::tolerance_for(want.dtype());
  const std::vector<double> g = got.to_vector<double>();
  const std::vector<double> w = want.contiguous().to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    const bool ok = std::isnan(w[i]) ? std::isnan(g[i]) : std::abs(g[i] - w[i]) <= 4 * (rtol * std::abs(w[i]) + atol);
    if (!ok) return ::testing::AssertionFailure() << "element " << i << ": got " << g[i] << ", want " << w[i];
  }
  return ::testing::AssertionSuccess();
}

TEST_F(RuntimeCuda, CreationOnAGpuMatchesTheCpu) {
  for (DType dt : {kFloat32, kFloat16, kBFloat16, kFloat64, kInt64, kInt32, kUInt8}) {
    SCOPED_TRACE(dtype_name(dt));
    EXPECT_TRUE(close(DistributedTensor::zeros({5, 3}, dt, kGpu).get(), Tensor::zeros({5, 3}, dt)));
    EXPECT_TRUE(close(DistributedTensor::ones({7}, dt, kGpu).get(), Tensor::ones({7}, dt)));
    EXPECT_TRUE(close(DistributedTensor::full({2, 2}, 5, dt, kGpu).get(), Tensor::full({2, 2}, 5, dt)));
    EXPECT_TRUE(close(DistributedTensor::arange(0, 9, 2, dt, kGpu).get(), Tensor::arange(0, 9, 2, dt)));
    EXPECT_TRUE(close(DistributedTensor::eye(3, 4, dt, kGpu).get(), Tensor::eye(3, 4, dt)));
  }
  EXPECT_TRUE(close(DistributedTensor::linspace(0, 1, 11, kFloat32, kGpu).get(), Tensor::linspace(0, 1, 11)));
  // Random draws: the same values as on the CPU for the same seed and node.
  for (int node : {0, 1}) {
    NodeScope on(node);
    manual_seed_all(42);
    const Tensor cpu_rand = DistributedTensor::rand({64}).get();
    const Tensor cpu_randn = DistributedTensor::randn({64}, kFloat64).get();
    const Tensor cpu_randint = DistributedTensor::randint(-5, 5, {64}).get();
    manual_seed_all(42);
    DeviceScope gpu(kGpu);
    DistributedTensor r = DistributedTensor::rand({64});
    EXPECT_EQ(r.device(), kGpu);
    EXPECT_TRUE(close(r.get(), cpu_rand));
    EXPECT_TRUE(close(DistributedTensor::randn({64}, kFloat64).get(), cpu_randn));
    EXPECT_TRUE(close(DistributedTensor::randint(-5, 5, {64}).get(), cpu_randint));
  }
  // Empty and 0-dim tensors.
  EXPECT_TRUE(close(DistributedTensor::zeros({0, 4}, kFloat32, kGpu).get(), Tensor::zeros({0, 4})));
  EXPECT_TRUE(close(DistributedTensor::full({}, 3.5, kFloat32, kGpu).get(), Tensor::full({}, 3.5)));
}

TEST_F(RuntimeCuda, UploadsAndDownloadsGoThroughHostMemory) {
  for (DType dt : {kFloat32, kFloat16, kInt64, kBool}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor local = testing::random_cpu({33, 17}, dt);
    DistributedTensor a = DistributedTensor::from(local, 1, kGpu);
    EXPECT_EQ(a.device(), kGpu);
    EXPECT_TRUE(close(a.get(), local));
    // A strided view of a GPU tensor comes back contiguous.
    EXPECT_TRUE(close(a.t().slice(0, 1, 17, 3).get(), local.t().slice(0, 1, 17, 3)));
  }
  // Large: past the channel's chunks and the pinned staging buffers' sizes.
  const Tensor big = testing::random_cpu({1 << 22}, kFloat32);
  DeviceScope gpu(kGpu);
  DistributedTensor b = big.dist_send();
  EXPECT_TRUE(close(b.get(), big));
  // A CUDA tensor of the master's uploads as well.
  EXPECT_TRUE(close(DistributedTensor::from(big.cuda(), 0).get(), big));
}

TEST_F(RuntimeCuda, OpsOnAGpuMatchTheCpu) {
  const Tensor x = testing::random_cpu({16, 32}, kFloat32);
  const Tensor y = testing::random_cpu({32, 8}, kFloat32);
  DistributedTensor gx = DistributedTensor::from(x, 0, kGpu);
  DistributedTensor gy = DistributedTensor::from(y, 0, kGpu);
  EXPECT_TRUE(close((gx * 2 + 1).get(), x * 2 + 1));
  EXPECT_TRUE(close(gx.matmul(gy).get(), x.matmul(y)));
  EXPECT_TRUE(close(gx.sum({1}).get(), x.sum({1})));
  EXPECT_TRUE(close(gx.softmax(1).get(), x.softmax(1)));
  EXPECT_TRUE(close(gx.t().contiguous().get(), x.t().contiguous()));
  DistributedTensor z = gx.clone();
  z.mul_(3).add_(gx);
  EXPECT_EQ(z.device(), kGpu);
  EXPECT_TRUE(close(z.get(), x * 3 + x));
  EXPECT_NEAR(gx.sum().item<double>(), x.sum().item<double>(), 1e-3 * (1 + std::abs(x.sum().item<double>())));
}

TEST_F(RuntimeCuda, DeviceMovesAndCopiesAcrossDevices) {
  const Tensor x = testing::random_cpu({10, 6}, kFloat32);
  DistributedTensor c = x.dist_send();
  DistributedTensor g = c.cuda();
  EXPECT_EQ(g.device(), kGpu);
  EXPECT_NE(g.id(), c.id());
  EXPECT_EQ(g.cuda().id(), g.id()) << "already there: the same tensor";
  DistributedTensor back = g.cpu();
  EXPECT_EQ(back.device(), Device::cpu());
  g.mul_(2);  // a copy: the CPU tensors are untouched
  EXPECT_TRUE(close(back.get(), x));
  EXPECT_TRUE(close(c.get(), x));
  EXPECT_TRUE(close(g.get(), x * 2));
  // copy_ both ways across devices; a strided source.
  DistributedTensor to_cpu = DistributedTensor::zeros({10, 6});
  to_cpu.copy_(g);
  EXPECT_TRUE(close(to_cpu.get(), x * 2));
  DistributedTensor to_gpu = DistributedTensor::zeros({6, 10}, kFloat32, kGpu);
  to_gpu.copy_(c.t());
  EXPECT_TRUE(close(to_gpu.get(), x.t()));
  // Mixed devices in one op: refused on the master, with the tensor library's error.
  EXPECT_THROW(c + g, ValueError);
  EXPECT_TRUE(close((c.cuda() + g).get(), x * 3));
}

TEST_F(RuntimeCuda, CopiesAndCollectivesBetweenWorkersOfGpuTensors) {
  const Tensor x = testing::random_cpu({300, 7}, kFloat32);
  DistributedTensor g0 = DistributedTensor::from(x, 0, kGpu);
  DistributedTensor g1 = g0.to_node(1);
  EXPECT_EQ(g1.node(), 1);
  EXPECT_EQ(g1.device(), kGpu);
  EXPECT_TRUE(close(g1.get(), x));
  EXPECT_TRUE(close(g0.t().to_node(1).get(), x.t()));
  // A collective over GPU tensors (staged through host memory), and a mixed one.
  std::vector<DistributedTensor> sums = {DistributedTensor::full({1000}, 1, kFloat32, kGpu),
                                         DistributedTensor::from(Tensor::full({1000}, 2), 1, kGpu)};
  all_reduce(sums);
  for (const auto& t : sums) {
    EXPECT_EQ(t.device(), kGpu);
    EXPECT_TRUE(close(t.get(), Tensor::full({1000}, 3)));
  }
  std::vector<DistributedTensor> mixed = {DistributedTensor::full({4}, 5, kFloat32, kGpu),
                                          DistributedTensor::from(Tensor::full({4}, 1), 1)};
  auto gathered = all_gather(mixed);
  EXPECT_EQ(gathered[0].device(), kGpu);
  EXPECT_EQ(gathered[1].device(), Device::cpu());
  const Tensor want = stack({Tensor::full({4}, 5), Tensor::full({4}, 1)});
  EXPECT_TRUE(close(gathered[0].get(), want));
  EXPECT_TRUE(close(gathered[1].get(), want));
}

TEST_F(RuntimeCuda, AGpuIndexTheWorkerLacksIsARemoteError) {
  const int n = cuda::device_count();
  DistributedTensor bad = DistributedTensor::ones({2}).cuda(n);
  try {
    bad.get();
    ADD_FAILURE() << "no error";
  } catch (const RemoteError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("has no device cuda:" + std::to_string(n)), std::string::npos) << what;
    EXPECT_NE(what.find("its worker has " + std::to_string(n) + " GPU"), std::string::npos) << what;
  }
  EXPECT_TRUE(close(DistributedTensor::ones({2}, kFloat32, kGpu).get(), Tensor::ones({2})));
}

TEST_F(RuntimeCuda, DeviceMemoryIsLimitedAndAnOutOfMemoryIsARemoteError) {
  const NodeStats before = stats().at(0);
  ASSERT_GE(before.cuda_devices, 1);
  // Past the whole GPU: the session's limit refuses it before anything is allocated.
  const int64_t too_many = int64_t{1} << 40;  // 4 TiB of float32
  DistributedTensor huge = DistributedTensor::empty({too_many}, kFloat32, kGpu);
  try {
    huge.get();
    ADD_FAILURE() << "a 4 TiB tensor was made";
  } catch (const RemoteOutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("past its limit"), std::string::npos) << e.what();
  }
  // Within each worker's limit, but not both at once on the one GPU they share: the
  // second allocation runs out of device memory (OutOfMemoryError on its worker).
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  const auto share = static_cast<int64_t>(free_bytes / 4 * 3) / 4;  // 75% of what is free, in float32
  DistributedTensor first = DistributedTensor::empty({share}, kFloat32, kGpu);
  first.fill_(1);
  synchronize();
  DistributedTensor second;
  {
    NodeScope node1(1);
    second = DistributedTensor::empty({share}, kFloat32, kGpu);
  }
  try {
    second.sum().get();
    ADD_FAILURE() << "two tensors of 75% of the free memory each fit on one GPU";
  } catch (const RemoteError& e) {
    EXPECT_EQ(e.context().node, 1);
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory) << e.what();
    EXPECT_NE(std::string(e.what()).find("memory"), std::string::npos) << e.what();
  }
  // Both workers survive; the memory comes back when the tensors go.
  first = DistributedTensor();
  synchronize();
  for (int node : {0, 1}) {
    NodeScope on(node);
    EXPECT_TRUE(close(DistributedTensor::full({8}, 2, kFloat32, kGpu).get(), Tensor::full({8}, 2)));
  }
}

TEST_F(RuntimeCuda, StatsReportEachGpusMemory) {
  DistributedTensor t = DistributedTensor::zeros({1 << 20}, kFloat32, kGpu);  // 4 MiB
  synchronize();
  const NodeStats s = stats().at(0);
  EXPECT_EQ(s.cuda_devices, cuda::device_count());
  ASSERT_EQ(s.devices.size(), static_cast<size_t>(s.cuda_devices));
  EXPECT_GE(s.devices[0].in_use, int64_t{4} << 20);
  EXPECT_GE(s.devices[0].peak, s.devices[0].in_use);
  EXPECT_LT(s.memory_in_use, int64_t{4} << 20) << "the GPU tensor is not host memory";
}

}  // namespace
}  // namespace thd::test
