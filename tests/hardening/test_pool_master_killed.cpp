// A worker pool whose master is SIGKILLed while the workers are busy with its work
// (seconds of ops queued on a side stream of every node, big tensors held): the
// pool drops that work instead of running it for a master that is gone, and serves
// the next master at once, with no tensor and no tensor memory of the dead
// session left. tests/pool/test_pool_faults.cpp kills an idle master holding a few
// small tensors.
#include <gtest/gtest.h>

#include <signal.h>

#include <thd/distributed.h>

#include "fault_checks.h"
#include "roles.h"
#include "test_util.h"

namespace thd::test {
namespace {

using namespace std::chrono_literals;

// From the kill to a new session attached: the workers notice the lost master,
// drop its work and free its tensors. Far less than the work queued.
constexpr milliseconds kServedAgainWithin{3000};

TEST(PoolMasterKilled, WhileWorkersAreBusyTheNextMasterIsServedAtOnce) {
  PoolUnderTest pool(2);
  TestProcess dying({self_path(), kMasterRole, "busy", pool.url()},
                    {{"THD_AUTH_TOKEN", kToken}, {"THD_HARDENING_TIMEOUT_MS", "10000"}});
  ASSERT_TRUE(dying.wait_for_output("master inside", 20000ms)) << dying.output() << pool.thdrun().output();
  dying.signal(SIGKILL);
  const auto killed = Clock::now();
  ASSERT_EQ(dying.wait(5000ms), 128 + SIGKILL);

  // The pool may still be finishing the dead session: a second master waits for
  // it (pool busy is an error only while a session is live).
  init_master_worker({.init_method = pool.url(), .timeout = 10000ms, .token = std::string(kToken)});
  const auto attached = std::chrono::duration_cast<milliseconds>(Clock::now() - killed);
  report_timing("next master attached", attached);
  EXPECT_LT(attached, kServedAgainWithin) << "the pool ran the dead master's work before serving the next one";
  EXPECT_EQ(detail::live_tensors_per_node(), std::vector<uint64_t>(2, 0));
  for (const NodeStats& s : stats()) {
    EXPECT_EQ(s.memory_in_use, 0) << "node " << s.node << " holds tensor memory of the dead session";
    EXPECT_EQ(s.live_tensors, 0u) << "node " << s.node;
  }
  for (int node = 0; node < 2; ++node) {
    NodeScope on(node);
    EXPECT_FLOAT_EQ((DistributedTensor::ones({8}) * 3.0f).sum().item<float>(), 24.0f) << "node " << node;
  }
  shutdown();
}

}  // namespace
}  // namespace thd::test
