// A worker at its memory limit (SessionLimits) driven by a real master session:
// the master's frees reach the node in the order they were issued, so a tensor
// dropped before the next one is made no longer counts against the limit, and an
// op reserves what it allocates, not a multiple of its input.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include <thd/datachannel.h>
#include <thd/distributed.h>
#include <thd/memory.h>
#include <thd/store.h>

#include "datachannel/test_util.h"
#include "master/session.h"
#include "worker/worker.h"

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

}  // namespace
}  // namespace thd
