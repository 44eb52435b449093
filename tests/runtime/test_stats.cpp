// thd::stats(): per node, the ops run, the ops queued per stream, the bytes moved and
// the tensor memory held (docs/master-worker.md, "Statistics").
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <utility>

#include <thd/distributed.h>
#include <thd/stream.h>

#include "datachannel/small_header.h"
#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class Stats : public JobTest<2> {
 protected:
  static void SetUpTestSuite() {
    ::setenv("THD_TEST_HOOKS", "1", 1);  // a stream held on a latch; the workers inherit it
    JobTest<2>::SetUpTestSuite();
    ::unsetenv("THD_TEST_HOOKS");
  }
};

TEST_F(Stats, CountOpsBytesMemoryAndQueuedWork) {
  synchronize();
  const std::vector<NodeStats> before = stats();
  ASSERT_EQ(before.size(), 2u);
  EXPECT_EQ(before[0].node, 0);
  EXPECT_EQ(before[1].node, 1);
  ASSERT_FALSE(before[1].streams.empty());
  EXPECT_EQ(before[1].streams[0].stream, 0u);  // the default stream comes first

  // 1 MiB to node 1, 20 ops there, 1 MiB back.
  const Tensor local = Tensor::ones({1 << 18});
  DistributedTensor x = local.dist_send(1);
  for (int i = 0; i < 20; ++i) x.add_(1);
  EXPECT_TRUE(same_tensor(x.get(), Tensor::full({1 << 18}, 21.0f)));
  const std::vector<NodeStats> after = stats();
  const NodeStats& n1 = after[1];
  EXPECT_GE(n1.ops_executed, before[1].ops_executed + 22);  // upload, 20 adds, fetch
  EXPECT_GE(n1.bytes_received, before[1].bytes_received + (uint64_t{1} << 20));
  EXPECT_GE(n1.bytes_sent, before[1].bytes_sent + (uint64_t{1} << 20));
  EXPECT_GT(n1.messages_received, before[1].messages_received);
  EXPECT_GE(n1.memory_in_use, int64_t{1} << 20);  // x lives there
  EXPECT_GE(n1.memory_peak, n1.memory_in_use);
  EXPECT_EQ(n1.live_tensors, before[1].live_tensors + 1);
  EXPECT_EQ(after[0].ops_executed, before[0].ops_executed);  // nothing ran on node 0

  // Work queued on a busy stream shows as queued.
  Stream s = Stream::create(0);
  Stream opener = Stream::create(0);
  Event gate;
  {
    StreamScope in(s);
    detail::test_latch_wait(/*key=*/2001, std::chrono::seconds(20));
    DistributedTensor a = DistributedTensor::ones({16});
    for (int i = 0; i < 50; ++i) a.add_(0);
    gate.record();
  }
  const NodeStats busy = stats()[0];
  ASSERT_EQ(busy.streams.size(), 3u);
  EXPECT_EQ(busy.streams[1].stream, s.id());
  // Held on the latch: the latch op runs, the other 52 wait.
  EXPECT_GE(busy.streams[1].queued_ops, 52u);
  {
    StreamScope in(opener);
    detail::test_latch_open(/*key=*/2001);
  }
  gate.synchronize();
  // The record fires its event inside its task, before the task returns: the
  // stream empties a moment after synchronize returns, never later.
  NodeStats idle = stats()[0];
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (idle.streams[1].queued_ops > 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    idle = stats()[0];
  }
  EXPECT_EQ(idle.streams[1].queued_ops, 0u);
}

// The session reports the backend it runs on: the one init_master_worker chose
// (LocalJob names none, so THD_BACKEND's, else tcp; runtime.ucx sets ucx).
TEST_F(Stats, TheSessionReportsItsBackend) {
  const char* env = std::getenv("THD_BACKEND");
  const std::string expected = env != nullptr && *env != '\0' ? env : "tcp";
  EXPECT_EQ(backend_name(), expected);
  for (const NodeStats& n : stats()) EXPECT_EQ(n.backend, expected) << "node " << n.node;
}

// A batch is one message of its own length on the wire: a one-op batch, which the
// master's flusher sends on its own, costs the node about a hundred bytes, not a
// padded frame. Measured as the node's channel counts what it receives: between
// two stats() calls it receives the second's request; with the op's batch in
// between, that too.
TEST_F(Stats, AOneOpBatchIsOneSmallMessage) {
  DistributedTensor a = DistributedTensor::ones({16});  // node 0
  DistributedTensor b = DistributedTensor::ones({16});
  synchronize();
  auto received = [] {
    const NodeStats n = stats()[0];
    return std::pair{n.bytes_received, n.messages_received};
  };
  for (int attempt = 0; attempt < 10; ++attempt) {
    const auto s0 = received();
    const auto s1 = received();
    DistributedTensor c = a + b;
    std::this_thread::sleep_for(std::chrono::milliseconds(20 << std::min(attempt, 4)));
    const auto s2 = received();
    ASSERT_EQ(s1.second - s0.second, 1u) << "one stats request is one message";
    if (s2.second - s1.second != 2) continue;  // the flusher had not sent the op alone yet
    const uint64_t stats_request = s1.first - s0.first;
    const uint64_t one_op = (s2.first - s1.first) - stats_request;
    // On the wire with tcp's header of a small message: at most 160 bytes.
    EXPECT_LE(stats_request + detail::kSmallHeaderBytes, 160u);
    EXPECT_GT(one_op, 16u);
    EXPECT_LE(one_op + detail::kSmallHeaderBytes, 160u);
    return;
  }
  FAIL() << "the op was never flushed on its own";
}

}  // namespace
}  // namespace thd::test
