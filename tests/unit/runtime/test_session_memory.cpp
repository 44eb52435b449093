// A worker at its memory limit (SessionLimits) driven by a real master session:
// the master's frees reach the node in the order they were issued, so a tensor
// dropped before the next one is made no longer counts against the limit, and an
// op reserves what it allocates, not a multiple of its input.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <thd/datachannel.h>
#include <thd/distributed.h>
#include <thd/memory.h>
#include <thd/store.h>

#include "datachannel/test_util.h"
#include "master/session.h"
#include "worker/worker.h"
#include "runtime/in_process_nodes.h"

namespace thd {
namespace {

using std::chrono::seconds;

constexpr size_t kLimit = size_t{48} << 20;
constexpr int64_t kFloats32MiB = int64_t{8} << 20;

// The test is the master (rank 0) of one node served by a thread with kLimit.
class SessionMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = std::make_shared<HashStore>();
    std::shared_ptr<DataChannel> master_channel, worker_channel;
    auto errors = test::run_rank_threads(2, [&](int rank) {
      DataChannelOptions o{.store = store, .rank = rank, .world_size = 2, .timeout = seconds(10),
                           .token = test::kToken};
      (rank == 0 ? master_channel : worker_channel) = DataChannel::create("tcp", o);
    });
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    worker_ = std::thread([worker_channel] { worker::serve(worker_channel, {.memory_bytes = kLimit}); });
    MasterWorkerOptions options;
    options.timeout = seconds(10);
    auto session = std::make_shared<master::Session>(master_channel, options, std::function<void()>{});
    session->start(/*session_id=*/1, /*seed=*/1);
    master::set_current_session(session);
  }

  void TearDown() override {
    shutdown();
    worker_.join();
  }

  std::thread worker_;
};

TEST_F(SessionMemory, ATensorDroppedBeforeTheNextIsMadeNoLongerCountsAgainstTheLimit) {
  // Two 32 MiB tensors never fit under 48 MiB at once; one after the other they do,
  // whether the drop and the next create share a command batch or not.
  for (int i = 0; i < 4; ++i) {
    DistributedTensor x = DistributedTensor::full({kFloats32MiB}, static_cast<float>(i));
    x.add_(1.0f);
  }
  DistributedTensor last = DistributedTensor::full({kFloats32MiB}, 2.0f);
  EXPECT_FLOAT_EQ(last.max().item<float>(), 2.0f);
  EXPECT_NO_THROW(synchronize());
}

TEST_F(SessionMemory, AReductionOfATensorLargerThanHalfTheLimitIsNotRefused) {
  // 40 MiB of float32 under a 48 MiB limit: a sum allocates 4 bytes, not 8 per element.
  DistributedTensor x = DistributedTensor::ones({int64_t{10} << 20});
  EXPECT_FLOAT_EQ(x.sum().item<float>(), static_cast<float>(int64_t{10} << 20));
  EXPECT_FLOAT_EQ(x.mean().item<float>(), 1.0f);
  EXPECT_EQ(x.argmax().item<int64_t>(), 0);
  EXPECT_FLOAT_EQ(x.view({1024, -1}).sum(Dims{1}).max().item<float>(), 10240.0f);
  EXPECT_NO_THROW(synchronize());
}

// Two nodes (threads of this process: the limit counts both nodes' tensors) at
// kLimit. A float16 all_reduce sum runs on a float32 copy of its tensor
// (datachannel/collectives/float32_accumulation.h), which the workers reserve.
class TwoNodeSessionMemory : public ::testing::Test {
 protected:
  void TearDown() override {
    try {
      shutdown();
    } catch (const RemoteError&) {
      // A refused collective fails on both nodes; the test saw one of the two errors.
    }
    nodes_.join();
  }

  test::InProcessNodes nodes_{2, {.memory_bytes = kLimit}};
};

DistributedTensor half_on(int node, int64_t numel, float value) {
  NodeScope on(node);
  return DistributedTensor::full({numel}, value, kFloat16);
}

TEST_F(TwoNodeSessionMemory, AHalfPrecisionSumReservesItsFloat32Copy) {
  // 2 x 4 MiB of float16 in use, 8 MiB of float32 scratch for the sum: well under 48 MiB.
  const int64_t small = int64_t{2} << 20;
  std::vector<DistributedTensor> xs = {half_on(0, small, 1.0f), half_on(1, small, 2.0f)};
  all_reduce(xs, ReduceOp::Sum);
  EXPECT_FLOAT_EQ(xs[1].max().item<float>(), 3.0f);
  xs.clear();
  synchronize();
  // 2 x 20 MiB in use: the float32 copy (40 MiB) would take a node past 48 MiB.
  const int64_t large = int64_t{10} << 20;
  std::vector<DistributedTensor> ys = {half_on(0, large, 1.0f), half_on(1, large, 2.0f)};
  all_reduce(ys, ReduceOp::Sum);
  try {
    synchronize();
    ADD_FAILURE() << "a float16 sum whose float32 copy exceeds the limit was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("past its limit"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace thd
