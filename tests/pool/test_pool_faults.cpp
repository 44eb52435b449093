// What the pool does when something goes wrong: a master or a worker killed
// mid-session, a client that floods a node and closes cleanly, a wrong token, a
// session that can never end.
#include <gtest/gtest.h>

#include <signal.h>

#include <cstdio>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <thd/thd.h>

#include "expect_throw.h"
#include "pool_process.h"
#include "test_util.h"

namespace thd::test {
namespace {

MasterWorkerOptions attach_options(const std::string& url) {
  return MasterWorkerOptions{.init_method = url, .timeout = kLong, .token = std::string(kToken)};
}

class PoolFaults : public ::testing::Test {
 protected:
  void TearDown() override {
    try {
      shutdown();
    } catch (const std::exception&) {
    }
  }
};

std::vector<uint64_t> parse_counts(const std::string& text) {
  std::vector<uint64_t> out;
  std::istringstream in(text);
  for (uint64_t v; in >> v;) out.push_back(v);
  return out;
}

float sum_on(int node) {
  NodeScope on(node);
  return (DistributedTensor::ones({10}) * 2.0f).sum().item<float>();
}

TEST_F(PoolFaults, MasterKilledMidSessionLeavesNoTensorForTheNext) {
  PoolUnderTest pool(2);
  {
    TestProcess holder({pool_master_path(), "hold", pool.url()}, {{"THD_AUTH_TOKEN", kToken}});
    ASSERT_TRUE(holder.wait_for_output("holding: ", kLong)) << holder.output();
    const std::vector<uint64_t> held = parse_counts(find_after(holder.output(), "holding").value_or(""));
    ASSERT_EQ(held.size(), 2u) << holder.output();
    EXPECT_GE(held[0], 2u);
    EXPECT_GE(held[1], 2u);
    holder.signal(SIGKILL);
    EXPECT_EQ(holder.wait(kLong), 128 + SIGKILL);
  }
  init_master_worker(attach_options(pool.url()));
  EXPECT_EQ(detail::live_tensors_per_node(), std::vector<uint64_t>(2, 0));
  EXPECT_FLOAT_EQ(sum_on(0), 20.0f);
  EXPECT_FLOAT_EQ(sum_on(1), 20.0f);
  shutdown();
}

TEST_F(PoolFaults, AClientThatFloodsANodeAndClosesCleanlyDoesNotWedgeThePool) {
  // The workers hold at most 1 MiB of messages no receive took, per peer; the
  // flooder sends node 0 more than that on a tag nobody receives (its connection
  // is then not read) and closes cleanly. The worker must still see it go.
  PoolUnderTest pool(2, {}, {{"THD_MAX_UNEXPECTED_BYTES", "1048576"}});
  {
    TestProcess flooder({pool_master_path(), "flood", pool.url(), std::to_string((1 << 20) + (128 << 10))},
                        {{"THD_AUTH_TOKEN", kToken}});
    ASSERT_EQ(flooder.wait(kLong), 0) << flooder.output();
  }
  const auto start = std::chrono::steady_clock::now();
  init_master_worker(attach_options(pool.url()));
  const auto attached = std::chrono::steady_clock::now() - start;
  EXPECT_LT(attached, std::chrono::seconds(5)) << "the next master waited";
  std::printf("[ figures  ] after a flood of 1.125 MiB and a clean close, the next master attached in %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(attached).count()));
  EXPECT_FLOAT_EQ(sum_on(0), 20.0f);
  EXPECT_FLOAT_EQ(sum_on(1), 20.0f);
  shutdown();
}

TEST_F(PoolFaults, WrongTokenIsRefused) {
  PoolUnderTest pool(1);
  MasterWorkerOptions o = attach_options(pool.url());
  o.token = "not-the-pool-token";
  THD_EXPECT_THROW_MSG(init_master_worker(o), AuthError, "cannot reach the worker pool at " + pool.url());

  // A worker with the wrong token cannot join either.
  TestProcess intruder({worker_path(), "--pool", pool.url(), "--node", "0", "--nodes", "1"},
                       {{"THD_AUTH_TOKEN", "not-the-pool-token"}});
  EXPECT_EQ(intruder.wait(kLong), 1) << intruder.output();
  EXPECT_NE(intruder.output().find("thd-worker node 0:"), std::string::npos) << intruder.output();

  // Neither disturbed the pool.
  init_master_worker(attach_options(pool.url()));
  EXPECT_FLOAT_EQ(sum_on(0), 20.0f);
  shutdown();
}

TEST_F(PoolFaults, WorkerKilledMidSessionIsReplacedForTheNextSession) {
  PoolUnderTest pool(2);
  init_master_worker(attach_options(pool.url()));
  EXPECT_FLOAT_EQ(sum_on(1), 20.0f);
  const std::vector<pid_t> workers = pool.worker_pids();
  ASSERT_EQ(workers.size(), 2u);
  const int victim = node_of(workers[1]);
  ASSERT_TRUE(victim == 0 || victim == 1) << "pid " << workers[1];
  ::kill(workers[1], SIGKILL);
  ASSERT_TRUE(pool.thdrun().wait_for_output(cat("pool node ", victim, " (pid ", workers[1],
                                                ") was killed by signal SIGKILL; starting it again"),
                                            kLong))
      << pool.thdrun().output();
  EXPECT_THROW(sum_on(victim), WorkerLost);
  EXPECT_FLOAT_EQ(sum_on(1 - victim), 20.0f);
  shutdown();

  // The replacement skipped the session its predecessor was in; the pool was
  // released once the other node finished it, and both nodes serve the next one.
  init_master_worker(attach_options(pool.url()));
  EXPECT_EQ(detail::live_tensors_per_node(), std::vector<uint64_t>(2, 0));
  EXPECT_FLOAT_EQ(sum_on(0), 20.0f);
  EXPECT_FLOAT_EQ(sum_on(1), 20.0f);
  shutdown();
}

// thd-worker processes on their own, node 0 hosting the store.
struct StandalonePool {
  explicit StandalonePool(int nodes) : url("tcp://127.0.0.1:" + std::to_string(free_port())) {
    for (int node = 0; node < nodes; ++node) {
      std::vector<std::string> argv = {worker_path(),         "--pool",  url, "--node", std::to_string(node),
                                       "--nodes", std::to_string(nodes)};
      if (node == 0) argv.push_back("--host-store");
      // At info level a worker logs its sessions, so a test can wait for one to end.
      workers.emplace_back(std::make_unique<TestProcess>(
          argv, EnvChanges{{"THD_AUTH_TOKEN", kToken}, {"THD_LOG_LEVEL", "info"}}, SIGTERM));
    }
  }
  std::string url;
  std::vector<std::unique_ptr<TestProcess>> workers;
};

TEST_F(PoolFaults, StandaloneWorkersServeAndStopOnSigterm) {
  StandalonePool pool(2);
  init_master_worker(attach_options(pool.url));
  EXPECT_EQ(num_nodes(), 2);
  EXPECT_FLOAT_EQ(sum_on(0), 20.0f);
  EXPECT_FLOAT_EQ(sum_on(1), 20.0f);
  shutdown();
  // Between sessions a stop signal ends a worker cleanly; node 0 (the store) last.
  for (int node = 1; node >= 0; --node) {
    TestProcess& w = *pool.workers[static_cast<size_t>(node)];
    ASSERT_TRUE(w.wait_for_output("session 1 ended: goodbye", kLong)) << w.output();
    w.signal(SIGTERM);
    EXPECT_EQ(w.wait(kLong), 0) << "node " << node << ":\n" << w.output();
  }
}

TEST_F(PoolFaults, WorkersEndWhenThePoolsStoreGoesAway) {
  StandalonePool pool(2);
  // A session served by both nodes shows that node 1 is up; then the store goes
  // away with its host.
  init_master_worker(attach_options(pool.url));
  shutdown();
  pool.workers[0]->signal(SIGKILL);
  EXPECT_EQ(pool.workers[1]->wait(kLong), 1) << pool.workers[1]->output();
  EXPECT_NE(pool.workers[1]->output().find("thd-worker node 1:"), std::string::npos) << pool.workers[1]->output();
}

TEST_F(PoolFaults, SessionThatCannotEndIsReportedNamingTheNode) {
  StandalonePool pool(2);
  init_master_worker(attach_options(pool.url));
  EXPECT_FLOAT_EQ(sum_on(1), 20.0f);
  // Nobody restarts a standalone worker: node 1 never finishes this session.
  pool.workers[1]->signal(SIGKILL);
  pool.workers[1]->wait(kLong);
  EXPECT_THROW(sum_on(1), WorkerLost);
  shutdown();

  MasterWorkerOptions o = attach_options(pool.url);
  o.timeout = std::chrono::milliseconds(1500);
  THD_EXPECT_THROW_MSG(init_master_worker(o), TimeoutError, "node(s) 1 have not finished it");
}

}  // namespace
}  // namespace thd::test
