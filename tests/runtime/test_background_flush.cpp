// The background flusher: ops issued with no sync point after them still reach the
// worker after the idle time (flush_after), also when the flusher had gone to sleep
// because nothing was pending for a while. The worker's resident memory shows that
// it ran them: each op makes a 64 MiB tensor of zeros.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <thd/distributed.h>

#include "job_fixture.h"

namespace thd::test {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

class BackgroundFlush : public JobTest<1> {};

constexpr int64_t kElements = int64_t{16} << 20;  // 64 MiB of float32
constexpr size_t kGrowth = size_t{48} << 20;

// Waits up to `limit` for the worker's resident memory to exceed `bytes`.
bool worker_grows_past(pid_t worker, size_t bytes, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (resident_bytes(worker) > bytes) return true;
    std::this_thread::sleep_for(2ms);
  }
  return false;
}

TEST_F(BackgroundFlush, OpsWithoutASyncPointRunAfterTheIdleTimeAlsoAfterTheFlusherSlept) {
  const pid_t worker = job().worker_pid(0);
  synchronize();
  const size_t before = resident_bytes(worker);
  // No flush, no sync: only the flusher can send this.
  DistributedTensor a = DistributedTensor::zeros({kElements});
  EXPECT_TRUE(worker_grows_past(worker, before + kGrowth, 2000ms))
      << "the worker did not run an op left in the master's buffer";
  // Long enough for the flusher to find nothing pending and go to sleep; the next
  // op must wake it.
  std::this_thread::sleep_for(200ms);
  const size_t middle = resident_bytes(worker);
  DistributedTensor b = DistributedTensor::zeros({kElements});
  // Well under the sleeping flusher's own look-again period (2 s): the op woke it.
  EXPECT_TRUE(worker_grows_past(worker, middle + kGrowth, 1000ms))
      << "an op issued while the flusher slept was not sent until the flusher looked again by itself";
  synchronize();
}

}  // namespace
}  // namespace thd::test
