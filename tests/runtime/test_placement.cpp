// Where tensors live: node 0 by default, NodeScope (nested, per thread) for new
// tensors, results on their operands' node whatever the scope, explicit nodes for
// uploads, and to_node copies between workers (values, views, ordering).
#include <gtest/gtest.h>

#include <latch>
#include <thread>

#include <thd/distributed.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class Placement : public JobTest<3> {};

// Every way to make a tensor on the current node, and the node it went to.
std::vector<int> nodes_of_new_tensors() {
  const Tensor local = Tensor::ones({2});
  return {DistributedTensor({2}).node(),
          DistributedFloatTensor({2}).node(),
          DistributedTensor::empty({2}).node(),
          DistributedTensor::zeros({2}).node(),
          DistributedTensor::ones({2}).node(),
          DistributedTensor::full({2}, 3).node(),
          DistributedTensor::arange(4).node(),
          DistributedTensor::linspace(0, 1, 3).node(),
          DistributedTensor::eye(2).node(),
          DistributedTensor::rand({2}).node(),
          DistributedTensor::randn({2}).node(),
          DistributedTensor::randint(0, 3, {2}).node(),
          DistributedTensor::from(local).node(),
          local.dist_send().node()};
}

TEST_F(Placement, NodeScopesNestAndRestore) {
  EXPECT_EQ(current_node(), 0);
  for (int n : nodes_of_new_tensors()) EXPECT_EQ(n, 0);
  {
    NodeScope on2(2);
    EXPECT_EQ(current_node(), 2);
    for (int n : nodes_of_new_tensors()) EXPECT_EQ(n, 2);
    {
      NodeScope on1(1);
      EXPECT_EQ(current_node(), 1);
      for (int n : nodes_of_new_tensors()) EXPECT_EQ(n, 1);
      {
        NodeScope on1_again(1);
        EXPECT_EQ(current_node(), 1);
      }
      EXPECT_EQ(current_node(), 1);
    }
    EXPECT_EQ(current_node(), 2);
    EXPECT_EQ(DistributedTensor::zeros({1}).node(), 2);
  }
  EXPECT_EQ(current_node(), 0);
  // An explicit node beats the scope.
  NodeScope on1(1);
  EXPECT_EQ(DistributedTensor::from(Tensor::ones({1}), 2).node(), 2);
  EXPECT_EQ(Tensor::ones({1}).dist_send(0).node(), 0);
}

TEST_F(Placement, ResultsStayOnTheirOperandsNode) {
  const Tensor la = sample_tensor({3, 3}, kFloat32, 1);
  DistributedTensor a = la.dist_send(2);
  NodeScope on0(0);
  DistributedTensor b = (a + 1).matmul(a).sum({0});
  EXPECT_EQ(b.node(), 2);
  EXPECT_EQ(a.t().node(), 2);
  EXPECT_EQ(a.split(1)[2].node(), 2);
  EXPECT_EQ(a.sort().second.node(), 2);
  EXPECT_TRUE(same_tensor(b.get(), (la + 1).matmul(la).sum({0})));
  // The same computation on every node gives the same result.
  for (int node = 0; node < 3; ++node) {
    DistributedTensor x = la.dist_send(node);
    EXPECT_TRUE(same_tensor((x + 1).matmul(x).sum({0}).get(), b.get())) << "node " << node;
  }
}

TEST_F(Placement, ScopesArePerThread) {
  std::latch scoped(1);
  std::latch checked(1);
  int node_in_thread = -1;
  int node_of_thread_tensor = -1;
  std::thread other([&] {
    NodeScope on(2);
    scoped.count_down();
    node_in_thread = current_node();
    node_of_thread_tensor = DistributedTensor::ones({2}).node();
    checked.wait();
  });
  scoped.wait();
  EXPECT_EQ(current_node(), 0) << "another thread's NodeScope moved this thread";
  EXPECT_EQ(DistributedTensor::ones({2}).node(), 0);
  checked.count_down();
  other.join();
  EXPECT_EQ(node_in_thread, 2);
  EXPECT_EQ(node_of_thread_tensor, 2);
}

TEST_F(Placement, ThreadsDriveDifferentNodesAtOnce) {
  constexpr int kOps = 300;
  std::vector<Tensor> results(3);
  std::vector<std::thread> threads;
  for (int node = 0; node < 3; ++node) {
    threads.emplace_back([&, node] {
      NodeScope on(node);
      DistributedTensor x = DistributedTensor::full({8}, node, kInt64);
      for (int i = 0; i < kOps; ++i) x.add_(i % 5);
      results[static_cast<size_t>(node)] = x.get();
    });
  }
  for (auto& t : threads) t.join();
  int64_t added = 0;
  for (int i = 0; i < kOps; ++i) added += i % 5;
  for (int node = 0; node < 3; ++node) {
    EXPECT_TRUE(same_tensor(results[static_cast<size_t>(node)], Tensor::full({8}, node + added, kInt64)))
        << "node " << node;
  }
}

TEST_F(Placement, ToNodeCopiesBetweenWorkers) {
  for (DType dt : {kBool, kInt32, kFloat16, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor la = sample_tensor({4, 5}, dt, 2);
    DistributedTensor a = la.dist_send(0);
    for (int to : {1, 2, 0}) {
      DistributedTensor b = a.to_node(to);
      EXPECT_TRUE(matches(b, la, to)) << "0 -> " << to;
    }
    // A view arrives as its elements (contiguous on the destination).
    EXPECT_TRUE(matches(a.t().slice(0, 1, 5, 2).to_node(2), la.t().slice(0, 1, 5, 2).contiguous(), 2));
    // Around the ring and back.
    EXPECT_TRUE(matches(a.to_node(1).to_node(2).to_node(0), la, 0));
  }
  // Larger than a batch and than one DataChannel chunk.
  const Tensor big = Tensor::arange(0, 1 << 20, 1, kFloat32);
  DistributedTensor on1 = big.dist_send(1);
  EXPECT_TRUE(matches(on1.to_node(2), big, 2));
}

TEST_F(Placement, ToNodeIsACopyTakenInIssueOrder) {
  DistributedTensor a = DistributedTensor::zeros({4}, kInt64);
  a.add_(5);                        // before the copy: included
  DistributedTensor b = a.to_node(1);
  a.add_(100);                      // after the copy: not included
  b.mul_(2);                        // on the copy only
  EXPECT_TRUE(same_tensor(a.get(), Tensor::full({4}, 105, kInt64)));
  EXPECT_TRUE(same_tensor(b.get(), Tensor::full({4}, 10, kInt64)));
  // Copies back and forth in one stream of ops, never synchronized in between.
  DistributedTensor x = DistributedTensor::ones({3}, kInt64);
  for (int i = 0; i < 20; ++i) {
    DistributedTensor y = x.to_node(1 + i % 2);
    y.add_(1);
    x = y.to_node(0);
  }
  EXPECT_TRUE(same_tensor(x.get(), Tensor::full({3}, 21, kInt64)));
}

}  // namespace
}  // namespace thd::test
