// CUDA tensors through the DataChannel's own calls: on a channel of the nccl
// backend they go to its NCCL collectives, on a channel of any other backend to
// NCCL beside it (what the master-worker runtime's collectives rely on).
#include <gtest/gtest.h>

#include <thd/cuda.h>
#include <thd/datachannel.h>

#include "datachannel/group_state.h"
#include "datachannel/nccl/nccl_backend.h"
#include "expect_throw.h"
#include "nccl_test_util.h"

namespace thd::test {
namespace {

Tensor ramp(int64_t n, DType dtype, double shift = 0) {
  return (Tensor::arange(0, n, 1, kFloat64) + shift).to(dtype);
}

void run_collectives(int rank, DataChannel& ch) {
  const int world = ch.size();
  Tensor sum = ramp(64, kBFloat16, rank).cuda(rank);
  ch.all_reduce(sum, ReduceOp::Sum);
  EXPECT_EQ(sum.cpu().to_vector<double>(), (ramp(64, kFloat64) * world + world * (world - 1) / 2).to_vector<double>());
  Tensor out = Tensor::full({world, 32}, -3, kFloat32).cuda(rank);
  ch.iall_gather(out, ramp(32, kFloat32, 100 * rank).cuda(rank)).wait();
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(out.select(0, r).cpu().to_vector<double>(), ramp(32, kFloat64, 100 * r).to_vector<double>());
  }
  Tensor b = ramp(16, kInt64, rank).cuda(rank);
  ch.broadcast(b, 0);
  EXPECT_EQ(b.cpu().to_vector<int64_t>(), ramp(16, kInt64).to_vector<int64_t>());
  // A CPU tensor on the same channel still goes through the host transport.
  Tensor host = Tensor::full({4}, rank + 1, kFloat32);
  ch.all_reduce(host, ReduceOp::Max);
  EXPECT_EQ(host.to_vector<float>(), std::vector<float>(4, static_cast<float>(world)));
}

TEST(NcclDataChannel, CudaTensorsOnTheNcclBackendGoThroughNccl) {
  THD_REQUIRE_GPUS(1);
  run_world("nccl", 1, [](int rank, const std::shared_ptr<DataChannel>& ch) {
    run_collectives(rank, *ch);
    EXPECT_EQ(detail::nccl::collectives_of(detail::state_of(*ch))->stats().communicators_created, 1u);
    Tensor on_gpu = Tensor::ones({4}).cuda();
    Tensor on_cpu = Tensor::empty({4});
    THD_EXPECT_THROW_MSG(ch->all_gather(on_cpu, on_gpu), ValueError, "output is on cpu");
  });
}

TEST(NcclDataChannel, CudaTensorsOnATcpChannelGoThroughNccl) {
  THD_REQUIRE_GPUS(1);
  run_world("tcp", 1, [](int rank, const std::shared_ptr<DataChannel>& ch) {
    run_collectives(rank, *ch);
    auto group = ch->new_group({0});
    Tensor t = Tensor::ones({8}).cuda();
    group->all_reduce(t, ReduceOp::Avg);
    EXPECT_EQ(t.cpu().to_vector<float>(), std::vector<float>(8, 1.0f));
  });
}

TEST(NcclDataChannel, TwoRanksOfATcpChannelReduceOnTheirGpus) {
  THD_REQUIRE_GPUS(2);
  run_world("tcp", 2, [](int rank, const std::shared_ptr<DataChannel>& ch) {
    run_collectives(rank, *ch);
    Tensor msg = ramp(8, kFloat32, rank).cuda(rank);
    if (rank == 0) {
      ch->send(msg, 1);
    } else {
      EXPECT_EQ(ch->recv(msg, 0), 0);
      EXPECT_EQ(msg.cpu().to_vector<double>(), ramp(8, kFloat64).to_vector<double>());
    }
  });
}

}  // namespace
}  // namespace thd::test
