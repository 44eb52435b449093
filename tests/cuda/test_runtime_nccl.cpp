// Master-issued collectives of GPU tensors go through NCCL, device to device, when
// every member's tensor is on a GPU of its own (worker/collective_path.h); workers
// that share a GPU stage through host memory instead (RuntimeCuda's collective test
// covers that: both of its workers use this host's GPU 0). Needs a GPU; the
// two-GPU suite also skips on a host with fewer than two.
//
// How a test tells the ways apart: staging copies the tensor into the worker's host
// memory, which thd::stats() counts in the node's peak; the device path allocates
// no host memory beyond the members' few-byte agreement. Each suite is a job of its
// own, so the peak is this suite's.
#include <gtest/gtest.h>

#include <thd/cuda.h>
#include <thd/distributed.h>

#include "cuda_job_fixture.h"
#include "cuda_test_util.h"
#include "remote_check.h"

namespace thd::test {
namespace {

// Far above what anything else in these suites holds on a worker's host.
constexpr int64_t kElements = int64_t{64} << 20;  // 256 MiB of float32
constexpr int64_t kStagedBytes = kElements * 4;

int64_t host_peak(int node) {
  for (const NodeStats& s : stats()) {
    if (s.node == node) return s.memory_peak;
  }
  ADD_FAILURE() << "thd::stats() has no node " << node;
  return -1;
}

class RuntimeNcclOneWorker : public CudaJobTest<1> {
 protected:
  void SetUp() override {
    THD_REQUIRE_NCCL();
    CudaJobTest<1>::SetUp();
  }
};

TEST_F(RuntimeNcclOneWorker, ACollectiveOfOneGpuTensorRunsOnTheDevice) {
  const Device gpu = Device::cuda(0);
  std::vector<DistributedTensor> one = {DistributedTensor::full({kElements}, 3, kFloat32, gpu)};
  all_reduce(one, ReduceOp::Max);
  broadcast(one, 0);
  EXPECT_EQ(one[0].device(), gpu);
  const Tensor head = one[0].slice(0, 0, 8).get();
  EXPECT_TRUE(same_tensor(head, Tensor::full({8}, 3)));
  EXPECT_LT(host_peak(0), kStagedBytes) << "the collective was staged through the worker's host memory";
  // A reduction NCCL lacks still works, staged.
  std::vector<DistributedTensor> bits = {DistributedTensor::full({4}, 6, kInt32, gpu)};
  all_reduce(bits, ReduceOp::BOr);
  EXPECT_TRUE(same_tensor(bits[0].get(), Tensor::full({4}, 6, kInt32)));
}

class RuntimeNcclTwoGpus : public CudaJobTest<2> {
 protected:
  void SetUp() override {
    THD_REQUIRE_NCCL();
    if (cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs (NCCL runs one rank per GPU); this host has "
                                               << cuda::device_count();
    CudaJobTest<2>::SetUp();
  }
};

// A tensor on `node`'s GPU `node` (the node's index picks a GPU of its own).
DistributedTensor on_gpu_of(int node, const Shape& shape, float value) {
  NodeScope in(node);
  return DistributedTensor::full(shape, value, kFloat32, Device::cuda(node));
}

TEST_F(RuntimeNcclTwoGpus, WorkersOnGpusOfTheirOwnReduceDeviceToDevice) {
  std::vector<DistributedTensor> sums = {on_gpu_of(0, {kElements}, 1), on_gpu_of(1, {kElements}, 2)};
  all_reduce(sums);
  for (const auto& t : sums) EXPECT_TRUE(same_tensor(t.slice(0, 0, 8).get(), Tensor::full({8}, 3)));
  const auto gathered = all_gather({on_gpu_of(0, {4}, 5), on_gpu_of(1, {4}, 7)});
  EXPECT_EQ(gathered[0].device(), Device::cuda(0));
  EXPECT_EQ(gathered[1].device(), Device::cuda(1));
  const Tensor want = stack({Tensor::full({4}, 5), Tensor::full({4}, 7)});
  EXPECT_TRUE(same_tensor(gathered[0].get(), want));
  EXPECT_TRUE(same_tensor(gathered[1].get(), want));
  EXPECT_LT(host_peak(0), kStagedBytes) << "node 0 staged the collective through its host memory";
  EXPECT_LT(host_peak(1), kStagedBytes) << "node 1 staged the collective through its host memory";
}

}  // namespace
}  // namespace thd::test
