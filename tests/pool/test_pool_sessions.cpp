// Masters attaching to a pool one after another: each session starts with no
// tensor of the previous one left, and a second master waits its turn.
#include <gtest/gtest.h>

#include <thd/thd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "expect_throw.h"
#include "pool_process.h"
#include "test_util.h"

namespace thd::test {
namespace {

MasterWorkerOptions attach_options(const std::string& url) {
  return MasterWorkerOptions{.init_method = url, .timeout = kLong, .token = std::string(kToken)};
}

// A test that fails half-way must not leave the next one attached.
class PoolSessions : public ::testing::Test {
 protected:
  void TearDown() override {
    try {
      shutdown();
    } catch (const std::exception&) {
    }
  }
};

std::vector<uint64_t> zeros(int n) { return std::vector<uint64_t>(static_cast<size_t>(n), 0); }

// Fills a tensor on every node and checks what comes back.
void check_arithmetic_on_every_node() {
  for (int node = 0; node < num_nodes(); ++node) {
    NodeScope on(node);
    auto x = DistributedTensor::full({4, 4}, 2.0f);
    auto y = x * static_cast<float>(node + 1) + 1.0f;
    EXPECT_EQ(y.node(), node);
    EXPECT_FLOAT_EQ(y.sum().item<float>(), 16.0f * (2.0f * static_cast<float>(node + 1) + 1.0f)) << "node " << node;
  }
}

TEST_F(PoolSessions, AttachTwiceInARowStartsEachSessionEmpty) {
  PoolUnderTest pool(2);
  pid_t node1 = -1;
  for (pid_t pid : pool.worker_pids()) node1 = node_of(pid) == 1 ? pid : node1;
  ASSERT_GT(node1, 0);
  const int64_t idle = resident_bytes(node1);
  constexpr int64_t kBig = int64_t{64} << 20;
  {
    init_master_worker(attach_options(pool.url()));
    ASSERT_EQ(num_nodes(), 2);
    EXPECT_EQ(detail::live_tensors_per_node(), zeros(2));
    check_arithmetic_on_every_node();
    // Tensors the master still holds when it detaches: the pool must free them,
    // a big one included.
    std::vector<DistributedTensor> kept;
    for (int node = 0; node < 2; ++node) {
      NodeScope on(node);
      kept.push_back(DistributedTensor::ones({32}));
      kept.push_back(kept.back() + 1.0f);
    }
    {
      NodeScope on(1);
      kept.push_back(DistributedTensor::full({kBig / 4}, 1.0f));  // every page written
    }
    synchronize();
    const std::vector<uint64_t> live = detail::live_tensors_per_node();
    EXPECT_GE(live.at(0), 2u);
    EXPECT_GE(live.at(1), 3u);
    EXPECT_GE(resident_bytes(node1), idle + kBig * 7 / 8);
    shutdown();
  }
  // Straight away: the workers may still be finishing the first session.
  init_master_worker(attach_options(pool.url()));
  EXPECT_EQ(detail::live_tensors_per_node(), zeros(2));
  // Node 1 gave the big tensor's memory back when the first session ended.
  EXPECT_LT(resident_bytes(node1), idle + kBig / 4);
  check_arithmetic_on_every_node();
  shutdown();
}

TEST_F(PoolSessions, ASecondMasterWaitsItsTurnAndIsServedOnceTheFirstDetaches) {
  PoolUnderTest pool(2);
  init_master_worker(attach_options(pool.url()));
  TestProcess second({pool_master_path(), "run", pool.url()}, {{"THD_AUTH_TOKEN", kToken}});
  // It says why it waits, and keeps waiting while the holder lives, however long that is.
  EXPECT_TRUE(second.wait_for_output("waiting for it to finish", kLong)) << second.output();
  EXPECT_NE(second.output().find("serves another master"), std::string::npos) << second.output();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(second.running()) << second.output();
  // The first session goes on undisturbed.
  check_arithmetic_on_every_node();
  shutdown();
  EXPECT_EQ(second.wait(kLong), 0) << second.output();
  EXPECT_NE(second.output().find("attached: 2 nodes"), std::string::npos) << second.output();
}

TEST_F(PoolSessions, AMasterStillWaitingAtItsTimeoutIsToldThePoolIsBusy) {
  PoolUnderTest pool(2);
  init_master_worker(attach_options(pool.url()));
  const auto start = std::chrono::steady_clock::now();
  {
    TestProcess second({pool_master_path(), "attach", pool.url()},
                       {{"THD_AUTH_TOKEN", kToken}, {"THD_POOL_MASTER_TIMEOUT_MS", "2000"}});
    EXPECT_EQ(second.wait(kLong), 4) << second.output();
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1900));
    EXPECT_NE(second.output().find("pool busy"), std::string::npos) << second.output();
    EXPECT_NE(second.output().find("after 2000 ms"), std::string::npos) << second.output();
  }
  check_arithmetic_on_every_node();
  shutdown();

  // And once it detached, the next master gets the pool at once.
  TestProcess third({pool_master_path(), "run", pool.url()}, {{"THD_AUTH_TOKEN", kToken}});
  EXPECT_EQ(third.wait(kLong), 0) << third.output();
}

TEST_F(PoolSessions, WorldSizeThatDisagreesWithThePoolIsRefused) {
  PoolUnderTest pool(2);
  MasterWorkerOptions o = attach_options(pool.url());
  o.world_size = 5;
  THD_EXPECT_THROW_MSG(init_master_worker(o), ValueError, "the pool at " + pool.url() + " has 2");
  // Nothing was claimed: the pool serves the next master.
  init_master_worker(attach_options(pool.url()));
  EXPECT_EQ(num_nodes(), 2);
  shutdown();
}

}  // namespace
}  // namespace thd::test
