// Errors only a worker can see (an index out of range in the data) come back as
// thd::RemoteError at the next sync point that depends on them, naming the op, the
// node and the worker's original message. The failing op's outputs are poisoned, and
// so is everything computed from them (raising the original error, not one of their
// own); unrelated tensors and the worker itself keep working; thd::synchronize()
// raises an error nobody has seen yet, once.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include <thd/distributed.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class RemoteErrors : public JobTest<2> {};

// What the local library says about the same bad call.
Error local_error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e;
  }
  throw std::logic_error("the local call did not fail");
}

// get() of `t` raises a RemoteError for `op` on `node` carrying `original`'s message.
::testing::AssertionResult raises_remote_error(const DistributedTensor& t, const std::string& op, int node,
                                               const Error& original, uint64_t* op_id = nullptr) {
  try {
    Tensor got = t.get();
    return ::testing::AssertionFailure() << "get() returned " << got.str() << " instead of raising";
  } catch (const RemoteError& e) {
    if (e.context().op != op) {
      return ::testing::AssertionFailure() << "RemoteError for op '" << e.context().op << "', expected '" << op
                                           << "': " << e.what();
    }
    if (e.context().node != node) {
      return ::testing::AssertionFailure() << "RemoteError on node " << e.context().node << ", expected " << node
                                           << ": " << e.what();
    }
    const std::string what = e.what();
    if (what.find(original.message()) == std::string::npos) {
      return ::testing::AssertionFailure() << "'" << what << "' does not carry the original message '"
                                           << original.message() << "'";
    }
    if (what.find("node " + std::to_string(node)) == std::string::npos) {
      return ::testing::AssertionFailure() << "'" << what << "' does not name node " << node;
    }
    if (e.op_id() == 0) return ::testing::AssertionFailure() << "RemoteError without the op's id: " << what;
    // The op is named once: "index_select: op 5 failed on node 0: index 9 is out of range ...".
    if (const size_t first = what.find(op); what.find(op + ":", first + op.size()) != std::string::npos ||
                                            what.find(op + " (op", first + op.size()) != std::string::npos) {
      return ::testing::AssertionFailure() << "'" << what << "' names " << op << " more than once";
    }
    if (what.find("op " + std::to_string(e.op_id()) + " failed on node " + std::to_string(node)) == std::string::npos) {
      return ::testing::AssertionFailure() << "'" << what << "' does not say which op failed where";
    }
    if (op_id != nullptr) *op_id = e.op_id();
    return ::testing::AssertionSuccess();
  } catch (...) {
    return ::testing::AssertionFailure() << "get() threw " << error_type(std::current_exception()) << ": "
                                         << error_text(std::current_exception());
  }
}

const Tensor kData = Tensor::arange(0, 12, 1, kFloat32).view({4, 3});
const Tensor kBadIndex = make({2}, kInt64, {1, 9});  // 9 is out of range for dim 0 (size 4)

TEST_F(RemoteErrors, AFailingOpRaisesAtItsSyncPointWithTheOriginalError) {
  const Error original = local_error_of([] { kData.index_select(0, kBadIndex); });
  for (int node : {0, 1}) {
    SCOPED_TRACE("node " + std::to_string(node));
    DistributedTensor x = kData.dist_send(node);
    DistributedTensor bad = x.index_select(0, kBadIndex.dist_send(node));  // no error here: it is data-dependent
    EXPECT_EQ(bad.shape(), (Shape{2, 3}));
    EXPECT_TRUE(raises_remote_error(bad, "index_select", node, original));
    // Raised again for the same tensor: it stays poisoned.
    EXPECT_TRUE(raises_remote_error(bad, "index_select", node, original));
    // The worker survived and the input is intact.
    EXPECT_TRUE(same_tensor(x.get(), kData));
    EXPECT_TRUE(same_tensor((x * 2).get(), kData * 2));
  }
  // Other data-dependent failures: gather and scatter indices, negative integer powers.
  DistributedTensor x = kData.dist_send(0);
  const Tensor gidx = make({4, 1}, kInt64, {0, 1, 5, 2});
  EXPECT_TRUE(raises_remote_error(x.gather(1, gidx.dist_send()), "gather", 0,
                                  local_error_of([&] { kData.gather(1, gidx); })));
  const Tensor sidx = make({1, 3}, kInt64, {0, -7, 1});
  EXPECT_TRUE(raises_remote_error(x.scatter(0, sidx.dist_send(), 1.0), "scatter", 0,
                                  local_error_of([&] { kData.scatter(0, sidx, 1.0); })));
  const Tensor ints = Tensor::arange(3);
  const Tensor exps = make({3}, kInt64, {1, -1, 2});
  EXPECT_TRUE(raises_remote_error(ints.dist_send(1).pow(exps.dist_send(1)), "pow", 1,
                                  local_error_of([&] { ints.pow(exps); })));
}

TEST_F(RemoteErrors, PoisonSpreadsToEverythingComputedFromTheFailedOp) {
  const Error original = local_error_of([] { kData.index_select(0, kBadIndex); });
  DistributedTensor x = kData.dist_send();
  DistributedTensor bad = x.index_select(0, kBadIndex.dist_send());
  DistributedTensor y = bad + 1;
  DistributedTensor z = y.t().matmul(y).sum();
  DistributedTensor w = cat({x, bad});
  DistributedTensor view = bad.select(0, 1);
  DistributedTensor target = DistributedTensor::zeros({2, 3});
  target.add_(bad);  // an in-place op that reads the poison poisons its target
  DistributedTensor unrelated = x * 3;
  uint64_t first_id = 0;
  EXPECT_TRUE(raises_remote_error(z, "index_select", 0, original, &first_id));
  uint64_t id = 0;
  for (const DistributedTensor* t : {&y, &w, &view, &target}) {
    EXPECT_TRUE(raises_remote_error(*t, "index_select", 0, original, &id));
    EXPECT_EQ(id, first_id) << "every poisoned tensor reports the same original op";
  }
  EXPECT_TRUE(raises_remote_error(target.sum(), "index_select", 0, original));
  EXPECT_TRUE(same_tensor(unrelated.get(), kData * 3));
  // copy_ from a poisoned tensor poisons a healthy target.
  DistributedTensor healed = Tensor::zeros({2, 3}).dist_send();
  healed.copy_(bad);
  EXPECT_TRUE(raises_remote_error(healed, "index_select", 0, original));
}

TEST_F(RemoteErrors, AnAllReduceWhoseMemberWasPoisonedInPlaceFailsOnEveryMemberAtOnce) {
  // The poisoned target of a failed in-place op holds no tensor: the collective
  // still tells the other member instead of leaving it waiting.
  std::vector<DistributedTensor> parts = {DistributedTensor::ones({2, 3}), DistributedTensor::ones({2, 3})};
  {
    NodeScope on(1);
    parts[1] = Tensor::zeros({2, 3}).dist_send(1);
    parts[1].copy_(kData.dist_send(1).index_select(0, kBadIndex.dist_send(1)));
  }
  const auto start = std::chrono::steady_clock::now();
  all_reduce(parts, ReduceOp::Sum);
  try {
    (void)parts[0].get();
    ADD_FAILURE() << "node 0's all_reduce output is not poisoned";
  } catch (const RemoteError& e) {
    EXPECT_EQ(e.context().op, "all_reduce") << e.what();
    EXPECT_NE(std::string(e.what()).find("node 1 cannot take part"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  try {
    (void)parts[1].get();
    ADD_FAILURE() << "node 1's all_reduce output is not poisoned";
  } catch (const RemoteError& e) {
    EXPECT_EQ(e.context().op, "index_select") << e.what();
  }
  try {
    synchronize();
  } catch (const RemoteError&) {
  }
}

TEST_F(RemoteErrors, PoisonFollowsACopyToAnotherNode) {
  const Error original = local_error_of([] { kData.index_select(0, kBadIndex); });
  DistributedTensor bad = kData.dist_send(0).index_select(0, kBadIndex.dist_send(0));
  DistributedTensor moved = bad.to_node(1);
  EXPECT_EQ(moved.node(), 1);
  EXPECT_TRUE(raises_remote_error((moved * 2).sum(), "index_select", 0, original));
  // Node 1 is fine otherwise.
  EXPECT_TRUE(same_tensor(Tensor::ones({2}).dist_send(1).get(), Tensor::ones({2})));
}

TEST_F(RemoteErrors, SynchronizeRaisesAnUnseenErrorOnce) {
  DistributedTensor x = kData.dist_send(1);
  {
    DistributedTensor dropped = x.index_select(0, kBadIndex.dist_send(1));  // never downloaded
  }
  EXPECT_THROW(
      {
        try {
          synchronize();
        } catch (const RemoteError& e) {
          EXPECT_EQ(e.context().op, "index_select");
          EXPECT_EQ(e.context().node, 1);
          throw;
        }
      },
      RemoteError);
  EXPECT_NO_THROW(synchronize()) << "the same error was raised twice";
  // An error already raised by get() is not raised again by synchronize().
  DistributedTensor bad = x.index_select(0, kBadIndex.dist_send(1));
  EXPECT_THROW(bad.get(), RemoteError);
  EXPECT_NO_THROW(synchronize());
  EXPECT_TRUE(same_tensor(x.get(), kData));
}

TEST_F(RemoteErrors, SeveralFailuresAreEachReportedWithTheirOwnOp) {
  DistributedTensor x = kData.dist_send();
  DistributedTensor bad1 = x.index_select(0, kBadIndex.dist_send());
  DistributedTensor fine = x.sum({0});
  DistributedTensor bad2 = x.gather(1, make({4, 1}, kInt64, {0, 0, 0, 3}).dist_send());
  uint64_t id1 = 0;
  uint64_t id2 = 0;
  EXPECT_TRUE(raises_remote_error(bad2, "gather", 0,
                                  local_error_of([] { kData.gather(1, make({4, 1}, kInt64, {0, 0, 0, 3})); }), &id2));
  EXPECT_TRUE(raises_remote_error(bad1, "index_select", 0,
                                  local_error_of([] { kData.index_select(0, kBadIndex); }), &id1));
  EXPECT_LT(id1, id2) << "op ids count the session's ops in issue order";
  EXPECT_TRUE(same_tensor(fine.get(), kData.sum({0})));
}

TEST_F(RemoteErrors, AnErrorInTheMiddleOfABatchSparesTheRest) {
  DistributedTensor acc = DistributedTensor::zeros({3}, kInt64);
  std::vector<DistributedTensor> failed;
  for (int i = 0; i < 100; ++i) {
    acc.add_(1);
    if (i % 25 == 0) failed.push_back(acc.index_select(0, make({1}, kInt64, {3}).dist_send()));
  }
  EXPECT_TRUE(same_tensor(acc.get(), Tensor::full({3}, 100, kInt64)));
  for (const auto& f : failed) EXPECT_THROW(f.get(), RemoteError);
  synchronize();
}

}  // namespace
}  // namespace thd::test
