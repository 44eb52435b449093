// A graph's definition on every node it spans (docs/graphs.md, "Errors"): when a
// node refuses its part, GraphCapture::end raises the refusal at once, naming the
// graph, the node and the cause, and drops the parts the other nodes defined; no
// node is left to wait in a collective or a copy for a node that has no graph.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <thd/distributed.h>
#include <thd/graph.h>
#include <thd/stream.h>

#include "job_fixture.h"
#include "local_job.h"
#include "remote_check.h"

namespace thd::test {
namespace {

constexpr int kRefusing = 1;

// A job of three workers whose node kRefusing refuses every graph definition (the
// THD_TEST_REFUSE_GRAPHS hook), as it refuses a part that fails verification.
class RefusingJob {
 public:
  RefusingJob() {
    ::setenv("THD_TEST_HOOKS", "1", 1);
    ::setenv("THD_TEST_REFUSE_GRAPHS", std::to_string(kRefusing).c_str(), 1);
    try {
      job_.emplace(3);
    } catch (...) {
      unset();
      throw;
    }
    unset();
  }
  LocalJob& job() { return *job_; }

 private:
  static void unset() {
    ::unsetenv("THD_TEST_HOOKS");
    ::unsetenv("THD_TEST_REFUSE_GRAPHS");
  }
  std::optional<LocalJob> job_;
};

std::vector<DistributedTensor> ones_on_every_node() {
  std::vector<DistributedTensor> t;
  for (int node = 0; node < 3; ++node) {
    NodeScope on(node);
    t.push_back(DistributedTensor::ones({64}, kFloat32));
  }
  return t;
}

TEST(GraphDefine, ANodeRefusingItsPartFailsTheCaptureEndAtOnceNamingTheGraphTheNodeAndTheCause) {
  RefusingJob refusing;
  std::vector<DistributedTensor> grads = ones_on_every_node();
  synchronize();
  const std::vector<uint64_t> live_before = thd::detail::live_tensors_per_node();
  const std::vector<NodeStats> stats_before = stats();

  DistributedTensor on1, on2, back;
  const auto start = std::chrono::steady_clock::now();
  try {
    // Nodes 0 and 2 would wait for node 1 in the all_reduce and in the copies.
    Graph g = thd::capture([&] {
      all_reduce(grads, ReduceOp::Sum);
      on1 = grads[0].to_node(1);
      on2 = (on1 + grads[1]).to_node(2);
      back = (on2 * 2).to_node(0);
    });
    FAIL() << "a graph node 1 refused was made (graph " << g.id() << ")";
  } catch (const RemoteError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.context().op, "GraphCapture::end") << what;
    EXPECT_EQ(e.context().node, kRefusing) << what;
    EXPECT_TRUE(std::regex_search(what, std::regex("graph [0-9]+ could not be defined: node 1 refused its part")))
        << what;
    EXPECT_NE(what.find("refuses graph definitions"), std::string::npos) << "the cause is not named: " << what;
    EXPECT_NE(what.find("dropped on nodes 0, 2"), std::string::npos) << what;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  // Raised once, by the capture's end.
  EXPECT_NO_THROW(synchronize());

  // A tensor the refusing node's part would have made carries the refusal.
  try {
    (void)on1.get();
    ADD_FAILURE() << "node 1's tensor of a refused graph is not poisoned";
  } catch (const RemoteError& e) {
    EXPECT_NE(std::string(e.what()).find("refuses graph definitions"), std::string::npos) << e.what();
  }
  // The graph's tensors are gone from every node once their handles are.
  on1 = on2 = back = DistributedTensor();
  synchronize();
  EXPECT_EQ(thd::detail::live_tensors_per_node(), live_before);
  const std::vector<NodeStats> stats_after = stats();
  for (size_t node = 0; node < 3; ++node) {
    EXPECT_LE(stats_after[node].memory_in_use, stats_before[node].memory_in_use) << "node " << node;
  }

  // Every node goes on: eager collectives and copies across all three.
  all_reduce(grads, ReduceOp::Sum);
  for (int node = 0; node < 3; ++node) {
    EXPECT_TRUE(same_tensor(grads[static_cast<size_t>(node)].get(), Tensor::full({64}, 3.0f, kFloat32)))
        << "node " << node;
  }
  EXPECT_TRUE(same_tensor(grads[0].to_node(1).to_node(2).to_node(0).get(), Tensor::full({64}, 3.0f, kFloat32)));
  (void)refusing.job().stop();
}

TEST(GraphDefine, GraphsOnTheOtherNodesAreDefinedAndReplayAsUsual) {
  RefusingJob refusing;
  std::vector<DistributedTensor> grads = ones_on_every_node();
  std::vector<DistributedTensor> pair = {grads[0], grads[2]};
  DistributedTensor moved;
  Graph g = thd::capture([&] {
    all_reduce(pair, ReduceOp::Sum);
    moved = pair[0].to_node(2).add(1);
  });
  EXPECT_EQ(g.nodes(), (std::vector<int>{0, 2}));
  for (int r = 0; r < 3; ++r) g.replay();
  // 1 -> 2 -> 4 -> 8 on both members.
  EXPECT_TRUE(same_tensor(pair[1].get(), Tensor::full({64}, 8.0f, kFloat32)));
  EXPECT_TRUE(same_tensor(moved.get(), Tensor::full({64}, 9.0f, kFloat32)));
  g.reset();
  (void)refusing.job().stop();
}

class GraphLimits : public JobTest<1> {};

TEST_F(GraphLimits, APartOfMoreCommandsThanABatchHoldsIsRefusedAtTheEndBeforeAnythingIsSent) {
  DistributedTensor x = DistributedTensor::zeros({1}, kFloat32);
  synchronize();
  const std::vector<uint64_t> live_before = thd::detail::live_tensors_per_node();
  constexpr size_t kLimit = size_t{1} << 20;  // protocol::kMaxCommandsPerBatch
  Event e;
  Stream s = current_stream(0);
  try {
    // Commands this small fit the message limit past the command limit.
    Graph g = thd::capture([&] {
      x.add_(1);
      e.record(s);
      for (size_t i = 0; i < kLimit; ++i) s.wait(e);
    });
    FAIL() << "a graph of " << kLimit + 2 << " commands on one node was made (graph " << g.id() << ")";
  } catch (const RemoteError& e) {
    FAIL() << "the node had to refuse the part: " << e.what();
  } catch (const ValueError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("holds " + std::to_string(kLimit + 2) + " commands on node 0"), std::string::npos) << what;
    EXPECT_NE(what.find("limit of " + std::to_string(kLimit) + " commands per batch"), std::string::npos) << what;
  }
  // Nothing ran: x is untouched, and the node holds no more than before.
  EXPECT_TRUE(same_tensor(x.get(), Tensor::zeros({1}, kFloat32)));
  EXPECT_EQ(thd::detail::live_tensors_per_node(), live_before);
}

}  // namespace
}  // namespace thd::test
