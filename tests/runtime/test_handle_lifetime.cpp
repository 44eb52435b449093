// Remote tensors live exactly as long as a handle to them: the last release frees
// the worker's tensor (100k creations leave the workers' handle tables as they were),
// and a tensor still used by pending ops or views is not freed under them.
#include <gtest/gtest.h>

#include <algorithm>

#include <thd/distributed.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class HandleLifetime : public JobTest<2> {};

std::vector<uint64_t> live_after_sync() {
  synchronize();
  return thd::detail::live_tensors_per_node();
}

std::vector<uint64_t> plus(std::vector<uint64_t> counts, int node, uint64_t extra) {
  counts.at(static_cast<size_t>(node)) += extra;
  return counts;
}

TEST_F(HandleLifetime, HeldTensorsAreCountedAndFreedOnRelease) {
  const std::vector<uint64_t> baseline = live_after_sync();
  ASSERT_EQ(baseline.size(), 2u);
  {
    std::vector<DistributedTensor> held;
    for (int i = 0; i < 10; ++i) held.push_back(DistributedTensor::zeros({4}));
    held.push_back(Tensor::ones({2}).dist_send(1));
    EXPECT_EQ(live_after_sync(), plus(plus(baseline, 0, 10), 1, 1));
    DistributedTensor copy = held[0];  // a copy of a handle is the same tensor
    held.clear();
    EXPECT_EQ(live_after_sync(), plus(baseline, 0, 1));
  }
  EXPECT_EQ(live_after_sync(), baseline);
}

TEST_F(HandleLifetime, HundredThousandCreateAndFreeLeaveNothingBehind) {
  const std::vector<uint64_t> baseline = live_after_sync();
  DistributedTensor keep = DistributedTensor::ones({8});
  for (int i = 0; i < 100000; ++i) {
    switch (i % 4) {
      case 0: DistributedTensor::zeros({8}); break;
      case 1: (void)(keep + i); break;                     // a result dropped at once
      case 2: (void)keep.view({2, 4}).t().sum({0}); break;  // views and their results
      default: {
        NodeScope on(1);
        DistributedTensor::full({8}, i);
      }
    }
  }
  EXPECT_EQ(live_after_sync(), plus(baseline, 0, 1));
  EXPECT_TRUE(same_tensor(keep.get(), Tensor::ones({8})));
}

TEST_F(HandleLifetime, ReleasedTensorsStayUntilTheirPendingOpsRan) {
  const std::vector<uint64_t> baseline = live_after_sync();
  DistributedTensor result;
  {
    DistributedTensor x = DistributedTensor::arange(0, 1000, 1, kFloat64);
    DistributedTensor y = x * 2;
    result = (x + y).sum();  // x and y are released before this runs
  }
  EXPECT_DOUBLE_EQ(result.item<double>(), 3 * 999 * 1000 / 2.0);
  // A view keeps its base's storage alive after the base's handle is gone.
  DistributedTensor view;
  {
    DistributedTensor base = DistributedTensor::arange(12).view({3, 4});
    view = base.select(1, 2);
  }
  EXPECT_TRUE(same_tensor(view.get(), make({3}, kInt64, {2, 6, 10})));
  // A copy sent to another node survives its source.
  DistributedTensor copy;
  {
    DistributedTensor source = DistributedTensor::full({3}, 7, kInt32);
    copy = source.to_node(1);
  }
  EXPECT_TRUE(same_tensor(copy.get(), Tensor::full({3}, 7, kInt32)));
  result = {};
  view = {};
  copy = {};
  EXPECT_EQ(live_after_sync(), baseline);
}

TEST_F(HandleLifetime, IdsAreNeverReused) {
  std::vector<uint64_t> ids;
  for (int i = 0; i < 1000; ++i) ids.push_back(DistributedTensor::zeros({1}).id());
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "a freed tensor's id was handed out again";
}

}  // namespace
}  // namespace thd::test
