// A graph's results that arrive from another node (worker-to-worker copies,
// all_gather and reduce_scatter outputs) land in the storage the previous replay's
// results hold (docs/graphs.md, "Memory"): driven by a real master session over two
// nodes served by threads of this process, so that thd::memory_stats() counts
// every tensor allocation of both workers.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <thd/datachannel.h>
#include <thd/distributed.h>
#include <thd/graph.h>
#include <thd/memory.h>
#include <thd/store.h>

#include "runtime/in_process_nodes.h"

namespace thd {
namespace {

using std::chrono::seconds;

constexpr int kReplays = 20;

class GraphMemory : public ::testing::Test {
 protected:
  void TearDown() override {
    shutdown();
    nodes_.join();
  }

  // The tensors both workers allocated over kReplays replays after the first.
  static int64_t allocations_of_replays(Graph& g) {
    g.replay();
    synchronize();
    const int64_t before = memory_stats().num_allocs;
    for (int i = 0; i < kReplays; ++i) g.replay();
    synchronize();
    return memory_stats().num_allocs - before;
  }

  test::InProcessNodes nodes_{2, {}};
};

DistributedTensor randn_on(int node, const Shape& shape, DType dtype = kFloat32) {
  NodeScope on(node);
  return DistributedTensor::randn(shape, dtype);
}

bool same_bytes(const Tensor& got, const Tensor& expected) {
  const Tensor e = expected.contiguous();
  return got.shape() == e.shape() && got.dtype() == e.dtype() &&
         std::memcmp(got.contiguous().data_ptr(), e.data_ptr(), got.nbytes()) == 0;
}

TEST_F(GraphMemory, CopiesBetweenNodesLandInTheKeptStorageOfEachReplay) {
  DistributedTensor a = randn_on(0, {64, 33});
  DistributedTensor ints;
  {
    NodeScope on(1);
    ints = DistributedTensor::arange(0, 300, 1, kInt64);
  }
  DistributedTensor there, doubled_back, ints_here;
  Graph g = capture([&] {
    there = a.to_node(1);
    doubled_back = (there * 2).to_node(0);
    ints_here = ints.to_node(0);
  });
  EXPECT_EQ(allocations_of_replays(g), 0) << "replays after the first allocated tensors";
  // Each replay receives the values its inputs have then.
  a.add_(1.5f);
  ints.mul_(3);
  g.replay();
  EXPECT_TRUE(same_bytes(there.get(), a.to_node(1).get()));
  EXPECT_TRUE(same_bytes(doubled_back.get(), (a.to_node(1) * 2).to_node(0).get()));
  EXPECT_TRUE(same_bytes(ints_here.get(), ints.to_node(0).get()));
  EXPECT_EQ(there.node(), 1);
  EXPECT_EQ(doubled_back.node(), 0);
}

TEST_F(GraphMemory, AllGatherOutputsAreWrittenInPlaceByEachReplayWithNoAllocation) {
  std::vector<DistributedTensor> xs = {randn_on(0, {6, 5}), randn_on(1, {6, 5})};
  std::vector<DistributedTensor> ints = {randn_on(0, {7}).mul(100).to(kInt32), randn_on(1, {7}).mul(100).to(kInt32)};
  std::vector<DistributedTensor> gathered, gathered_ints;
  Graph g = capture([&] {
    gathered = all_gather(xs);
    gathered_ints = all_gather(ints);
  });
  EXPECT_EQ(allocations_of_replays(g), 0) << "replays after the first allocated tensors";
  xs[0].mul_(-0.5f);
  ints[1].add_(3);
  g.replay();
  const std::vector<DistributedTensor> eager = all_gather(xs), eager_ints = all_gather(ints);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(same_bytes(gathered[i].get(), eager[i].get())) << i;
    EXPECT_TRUE(same_bytes(gathered_ints[i].get(), eager_ints[i].get())) << i;
  }
}

TEST_F(GraphMemory, AllGatherAndReduceScatterOutputsAreWrittenInPlaceByEachReplay) {
  std::vector<DistributedTensor> xs = {randn_on(0, {6, 5}), randn_on(1, {6, 5})};
  std::vector<DistributedTensor> ns = {randn_on(0, {4, 3}, kFloat64), randn_on(1, {4, 3}, kFloat64)};
  std::vector<DistributedTensor> gathered, scattered, maxima;
  Graph g = capture([&] {
    gathered = all_gather(xs);
    scattered = reduce_scatter(xs);
    maxima = reduce_scatter(ns, ReduceOp::Max);
  });
  // What each replay still allocates is the ring reduce_scatter's own receive slots,
  // one block per member (datachannel/collectives/ring_reduce_scatter.cpp): no
  // output, and nothing for the members' claims.
  EXPECT_EQ(allocations_of_replays(g), int64_t{kReplays} * 2 * 2) << "replays after the first allocated outputs";
  for (auto& x : xs) x.mul_(-0.5f);
  ns[1].add_(0.25);
  g.replay();
  const std::vector<DistributedTensor> eager_gathered = all_gather(xs);
  const std::vector<DistributedTensor> eager_scattered = reduce_scatter(xs);
  const std::vector<DistributedTensor> eager_maxima = reduce_scatter(ns, ReduceOp::Max);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(same_bytes(gathered[i].get(), eager_gathered[i].get())) << i;
    EXPECT_TRUE(same_bytes(scattered[i].get(), eager_scattered[i].get())) << i;
    EXPECT_TRUE(same_bytes(maxima[i].get(), eager_maxima[i].get())) << i;
    EXPECT_EQ(gathered[i].node(), static_cast<int>(i));
  }
}

}  // namespace
}  // namespace thd
