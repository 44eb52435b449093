// Ops on a node run in the order the master issued them: long chains of dependent,
// non-commuting in-place ops, reads interleaved with writes, and handles rebound to
// fresh results, all give the exact value a sequential run gives.
#include <gtest/gtest.h>

#include <thd/distributed.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class Ordering : public JobTest<2> {};

// Step i of a chain whose result depends on the order of every step: adds and
// negations do not commute, and the values stay small enough for int64.
int64_t step(int64_t v, int i) {
  switch (i % 4) {
    case 0: return v + i;
    case 1: return -v;
    case 2: return v * 3;
    default: return v - 2 * i;
  }
}

template <typename T>
void apply_step(T& x, int i) {
  switch (i % 4) {
    case 0: x.add_(i); break;
    case 1: x.neg_(); break;
    case 2: x.mul_(3); break;
    default: x.sub_(2 * i); break;
  }
}

TEST_F(Ordering, TenThousandDependentInPlaceOps) {
  constexpr int kSteps = 10000;
  for (int node : {0, 1}) {
    SCOPED_TRACE("node " + std::to_string(node));
    NodeScope on(node);
    DistributedTensor x = DistributedTensor::zeros({16}, kInt64);
    int64_t expected = 0;
    for (int i = 0; i < kSteps; ++i) {
      apply_step(x, i);
      expected = step(expected, i);
      // The value triples once per cycle of four steps: fold it back (in both
      // runs) long before int64 overflows.
      if (i % 4 == 3 && (expected > (int64_t{1} << 40) || expected < -(int64_t{1} << 40))) {
        x.fill_(i);
        expected = i;
      }
    }
    EXPECT_TRUE(same_tensor(x.get(), Tensor::full({16}, expected, kInt64))) << "expected " << expected;
  }
}

TEST_F(Ordering, ReadsSeeEveryEarlierWriteAndNoLaterOne) {
  DistributedTensor x = DistributedTensor::zeros({4}, kFloat64);
  std::vector<DistributedTensor> snapshots;
  for (int i = 1; i <= 200; ++i) {
    x.add_(1);
    if (i % 20 == 0) snapshots.push_back(x.clone());
  }
  x.fill_(-1);
  for (size_t k = 0; k < snapshots.size(); ++k) {
    EXPECT_TRUE(same_tensor(snapshots[k].get(), Tensor::full({4}, 20.0 * (k + 1), kFloat64))) << "snapshot " << k;
  }
  EXPECT_TRUE(same_tensor(x.get(), Tensor::full({4}, -1.0, kFloat64)));
}

TEST_F(Ordering, RebindingHandlesToFreshResults) {
  const Tensor l0 = sample_tensor({5}, kFloat64, 1);
  Tensor expected = l0.clone();
  DistributedTensor x = l0.dist_send();
  for (int i = 0; i < 2000; ++i) {
    if (i % 3 == 0) {
      x = x * 0.5 + i;
      expected = expected * 0.5 + i;
    } else if (i % 3 == 1) {
      x = x.sub(x.mean()).clamp(-50, 50);
      expected = expected.sub(expected.mean()).clamp(-50, 50);
    } else {
      x = -x;
      expected = -expected;
    }
    if (i % 500 == 499) {
      EXPECT_TRUE(same_tensor(x.get(), expected)) << "step " << i;
    }
  }
  EXPECT_TRUE(same_tensor(x.get(), expected));
}

TEST_F(Ordering, InterleavedNodesKeepTheirOwnOrder) {
  DistributedTensor a = DistributedTensor::zeros({2}, kInt64);
  DistributedTensor b = Tensor::zeros({2}, kInt64).dist_send(1);
  int64_t ea = 0;
  int64_t eb = 0;
  for (int i = 0; i < 3000; ++i) {
    apply_step(a, i);
    ea = step(ea, i);
    apply_step(b, i + 1);
    eb = step(eb, i + 1);
    if (i % 100 == 99) {
      a.fill_(i);
      b.fill_(-i);
      ea = i;
      eb = -i;
    }
  }
  EXPECT_TRUE(same_tensor(a.get(), Tensor::full({2}, ea, kInt64)));
  EXPECT_TRUE(same_tensor(b.get(), Tensor::full({2}, eb, kInt64)));
}

}  // namespace
}  // namespace thd::test
