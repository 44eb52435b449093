// A replayed elementwise command runs the plan it kept on its previous replay while
// its tensors are unchanged, and its usual path as soon as one is not
// (worker/kept_plans.h, docs/graphs.md "Replays"): driven by a real master session
// over nodes served by threads of this process, whose kept-plan counter the test
// reads.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include <thd/distributed.h>
#include <thd/graph.h>

#include "runtime/in_process_nodes.h"
#include "worker/kept_plans.h"

namespace thd {
namespace {

using worker::kept_plan_runs;

class GraphKeptPlans : public ::testing::Test {
 protected:
  void TearDown() override {
    shutdown();
    nodes_.join();
  }

  test::InProcessNodes nodes_{2, {}};
};

bool same_values(const Tensor& got, const Tensor& expected) {
  const Tensor e = expected.contiguous();
  return got.shape() == e.shape() && got.dtype() == e.dtype() &&
         std::memcmp(got.contiguous().data_ptr(), e.data_ptr(), got.nbytes()) == 0;
}

TEST_F(GraphKeptPlans, ReplaysFromTheThirdOnRunTheKeptPlansAndReadTheInputsCurrentValues) {
  DistributedTensor a = DistributedTensor::randn({16});
  DistributedTensor b = DistributedTensor::randn({16});
  DistributedTensor c, d;
  Graph g = capture([&] {
    c = a + b;
    d = c * a;
  });
  g.replay();  // makes c and d
  g.replay();  // writes them in place, keeping the plans
  synchronize();
  const uint64_t before = kept_plan_runs();
  const uint64_t executed = stats().at(0).ops_executed;
  for (int i = 0; i < 3; ++i) {
    a.add_(1.5f);  // in place: the same storage, new values
    g.replay();
  }
  synchronize();
  EXPECT_EQ(kept_plan_runs() - before, 6u) << "each replay's two commands run their kept plans";
  // The three add_ and the replays' six ops, each counted as an executed op.
  EXPECT_EQ(stats().at(0).ops_executed - executed, 9u);
  const Tensor ha = a.get(), hb = b.get();
  EXPECT_TRUE(same_values(c.get(), ha + hb));
  EXPECT_TRUE(same_values(d.get(), (ha + hb) * ha));
}

TEST_F(GraphKeptPlans, AnInputPoisonedAndRemadeBetweenReplaysIsNoticedByTheKeptPlan) {
  DistributedTensor src = DistributedTensor::arange(16, kFloat32);
  DistributedTensor index = DistributedTensor::arange(16, kInt64);
  DistributedTensor z = DistributedTensor::full({16}, 0.25f);
  DistributedTensor x, y;
  Graph make_x = capture([&] { x = src.index_select(0, index); });
  Graph use_x = capture([&] { y = x + z; });
  for (int i = 0; i < 3; ++i) {
    make_x.replay();
    use_x.replay();
  }
  synchronize();
  const uint64_t kept = kept_plan_runs();
  ASSERT_TRUE(same_values(y.get(), src.get() + 0.25f));
  EXPECT_GT(kept, 0u);

  // x poisoned: y, though its command kept a plan, carries x's poison.
  index.fill_(99);
  make_x.replay();
  use_x.replay();
  try {
    (void)y.get();
    ADD_FAILURE() << "y is not poisoned";
  } catch (const RemoteError& e) {
    EXPECT_EQ(e.context().op, "index_select") << e.what();
    const std::string named = "of graph " + std::to_string(make_x.id()) + " (replay 4)";
    EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
  }
  synchronize();
  EXPECT_EQ(kept_plan_runs(), kept) << "a poisoned input ran a kept plan";

  // The poison freed the storages of x and y: tensors of their size likely take
  // that memory now, and the next replays make x and y in new storages elsewhere,
  // which use_x's command must read and write. (Nothing is freed meanwhile: the
  // handle table's erasures alone would not tell.)
  DistributedTensor taker = DistributedTensor::full({16}, 1000.0f);
  DistributedTensor taker2 = DistributedTensor::full({16}, 1000.0f);
  index.fill_(3);
  const Tensor threes = Tensor::full({16}, 3, kInt64);
  make_x.replay();
  use_x.replay();
  EXPECT_TRUE(same_values(y.get(), src.get().index_select(0, threes) + 0.25f));
  make_x.replay();
  use_x.replay();
  src.mul_(2);
  make_x.replay();
  use_x.replay();
  EXPECT_TRUE(same_values(y.get(), src.get().index_select(0, threes) + 0.25f));
  EXPECT_GT(kept_plan_runs(), kept) << "the command kept a new plan and ran it";
  EXPECT_TRUE(same_values(taker.get(), Tensor::full({16}, 1000.0f)));
  EXPECT_TRUE(same_values(taker2.get(), Tensor::full({16}, 1000.0f)));
}

TEST_F(GraphKeptPlans, TensorsFreedBetweenReplaysLeaveTheKeptPlansRunning) {
  DistributedTensor a = DistributedTensor::randn({4, 4});
  DistributedTensor b = DistributedTensor::randn({4, 4});
  DistributedTensor c, d;
  Graph g = capture([&] {
    c = a - b;
    d = c / b;
  });
  g.replay();
  g.replay();
  synchronize();
  const uint64_t before = kept_plan_runs();
  for (int i = 0; i < 4; ++i) {
    { DistributedTensor scratch = a * 3.0f; }  // made and freed between two replays
    a.mul_(0.5f);
    g.replay();
  }
  synchronize();
  EXPECT_EQ(kept_plan_runs() - before, 8u) << "a free elsewhere in the handle table dropped the kept plans";
  const Tensor ha = a.get(), hb = b.get();
  EXPECT_TRUE(same_values(c.get(), ha - hb));
  EXPECT_TRUE(same_values(d.get(), (ha - hb) / hb));
}

TEST_F(GraphKeptPlans, CommandsWithANumberRunTheirKeptPlans) {
  DistributedTensor a = DistributedTensor::randn({2, 8});
  DistributedTensor c, d, e;
  Graph g = capture([&] {
    c = a * 2.0f;
    d = c - 0.5f;
    e = c + d;
  });
  g.replay();
  g.replay();
  synchronize();
  const uint64_t before = kept_plan_runs();
  for (int i = 0; i < 2; ++i) {
    a.add_(1.0f);
    g.replay();
  }
  synchronize();
  EXPECT_EQ(kept_plan_runs() - before, 6u);
  const Tensor ha = a.get();
  EXPECT_TRUE(same_values(c.get(), ha * 2.0f));
  EXPECT_TRUE(same_values(d.get(), ha * 2.0f - 0.5f));
  EXPECT_TRUE(same_values(e.get(), ha * 2.0f + (ha * 2.0f - 0.5f)));
}

}  // namespace
}  // namespace thd
