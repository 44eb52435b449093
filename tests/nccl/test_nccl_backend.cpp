// The nccl backend where no GPU is needed: it is listed, its host transport moves
// CPU tensors like the tcp backend, NCCL refuses what it cannot take before any
// CUDA call, and a process without a GPU is told so.
#include <gtest/gtest.h>

#include <algorithm>

#include <thd/cuda.h>
#include <thd/datachannel.h>

#include "datachannel/group_state.h"
#include "datachannel/nccl/nccl_backend.h"
#include "expect_throw.h"
#include "nccl_test_util.h"

namespace thd::test {
namespace {

using detail::nccl::collectives_of;

TEST(NcclBackend, IsListedAmongTheBuiltBackends) {
  const auto names = DataChannel::available_backends();
  EXPECT_NE(std::find(names.begin(), names.end(), "nccl"), names.end());
}

TEST(NcclBackend, HostTransportMovesCpuTensors) {
  // No GPU needed: CPU tensors, and every host message, go through the tcp
  // transport inside the backend.
  run_world("nccl", 2, [](int rank, const std::shared_ptr<DataChannel>& ch) {
    EXPECT_EQ(ch->backend(), "nccl");
    Tensor t = Tensor::full({5}, rank + 1, kFloat32);
    ch->all_reduce(t, ReduceOp::Sum);
    EXPECT_EQ(t.to_vector<float>(), std::vector<float>(5, 3.0f));
    Tensor msg = Tensor::full({3}, rank == 0 ? 7 : 0, kInt64);
    if (rank == 0) ch->send(msg, 1, {.tag = 4});
    else EXPECT_EQ(ch->recv(msg, 0, {.tag = 4}), 0);
    EXPECT_EQ(msg.to_vector<int64_t>(), std::vector<int64_t>(3, 7));
  });
}

TEST(NcclBackend, CollectivesBelongToTheNcclBackendOnly) {
  run_world("nccl", 1, [](int, const std::shared_ptr<DataChannel>& ch) {
    EXPECT_NE(collectives_of(detail::state_of(*ch)), nullptr);
    auto group = ch->new_group({0});
    // A group shares its channel's collectives (and so their communicators' cache).
    EXPECT_EQ(collectives_of(detail::state_of(*group)), collectives_of(detail::state_of(*ch)));
  });
  run_world("tcp", 1, [](int, const std::shared_ptr<DataChannel>& ch) {
    EXPECT_EQ(collectives_of(detail::state_of(*ch)), nullptr);
    // The runtime's hook: NCCL beside a channel of another backend, made lazily.
    auto hook = detail::nccl::make_collectives(*ch);
    EXPECT_EQ(hook->stats().communicators_created, 0u);
  });
}

TEST(NcclBackend, RefusesCpuTensorsNamingTheDevice) {
  run_world("nccl", 1, [](int, const std::shared_ptr<DataChannel>& ch) {
    auto& nccl = *collectives_of(detail::state_of(*ch));
    Tensor cpu = Tensor::ones({4});
    THD_EXPECT_THROW_MSG(nccl.all_reduce(detail::state_of(*ch), cpu, ReduceOp::Sum, {}), ValueError,
                         "the tensor is on cpu; NCCL moves CUDA tensors only");
    Tensor out = Tensor::empty({4});
    THD_EXPECT_THROW_MSG(nccl.all_gather(detail::state_of(*ch), out, cpu, {}), ValueError, "input is on cpu");
    THD_EXPECT_THROW_MSG(nccl.send(detail::state_of(*ch), cpu, 0, {}), ValueError, "is on cpu");
    EXPECT_EQ(nccl.stats().operations, 0u);
    EXPECT_EQ(nccl.stats().communicators_created, 0u);
  });
}

TEST(NcclBackend, RefusesBadCallsBeforeLookingAtTensors) {
  run_world("nccl", 1, [](int, const std::shared_ptr<DataChannel>& ch) {
    auto& nccl = *collectives_of(detail::state_of(*ch));
    Tensor t = Tensor::ones({4});
    THD_EXPECT_THROW_MSG(nccl.recv(detail::state_of(*ch), t, kAnySource, {}), ValueError, "kAnySource is not supported");
    THD_EXPECT_THROW_MSG(nccl.broadcast(detail::state_of(*ch), t, 3, {}), IndexError, "root rank 3 is out of range");
    THD_EXPECT_THROW_MSG(nccl.all_reduce(detail::state_of(*ch), t, ReduceOp::Sum, {.tag = -1}), ValueError,
                         "tag -1 is out of range");
  });
}

TEST(NcclBackend, ShutDownChannelRefusesDeviceOperations) {
  run_world("nccl", 1, [](int, const std::shared_ptr<DataChannel>& ch) {
    auto& nccl = *collectives_of(detail::state_of(*ch));
    auto group = ch->new_group({0});
    group->shutdown();
    Tensor t = Tensor::ones({4});
    THD_EXPECT_THROW_MSG(nccl.all_reduce(detail::state_of(*group), t, ReduceOp::Sum, {}), ValueError, "shut down");
  });
}

TEST(NcclBackend, WithoutAGpuABarrierSaysThereIsNoDevice) {
  if (cuda::is_available()) GTEST_SKIP() << "this machine has a GPU";
  run_world("nccl", 1, [](int, const std::shared_ptr<DataChannel>& ch) {
    auto& nccl = *collectives_of(detail::state_of(*ch));
    THD_EXPECT_THROW_MSG(nccl.barrier(detail::state_of(*ch), {}), ValueError, "no CUDA device");
  });
}

}  // namespace
}  // namespace thd::test
