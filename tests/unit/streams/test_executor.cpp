#include "streams/executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace thd::streams {
namespace {

using namespace std::chrono_literals;

Executor::Clock::time_point in(std::chrono::milliseconds d) { return Executor::Clock::now() + d; }

TEST(Executor, RunsTasksOneAtATimeInSubmissionOrder) {
  Executor ex("test-stream");
  std::vector<int> order;
  std::atomic<int> running{0};
  std::atomic<int> overlap{0};
  uint64_t last = 0;
  for (int i = 0; i < 200; ++i) {
    last = ex.submit([&, i] {
      if (running.fetch_add(1) != 0) overlap.fetch_add(1);
      order.push_back(i);  // only the executor's thread writes it
      if (i % 50 == 0) std::this_thread::sleep_for(1ms);
      running.fetch_sub(1);
    });
  }
  EXPECT_EQ(last, 200u);
  ASSERT_TRUE(ex.wait_for(last, in(5000ms)));
  EXPECT_EQ(overlap.load(), 0);
  ASSERT_EQ(order.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_EQ(ex.completed(), 200u);
  EXPECT_EQ(ex.queued(), 0u);
}

TEST(Executor, WaitTimesOutWhileATaskBlocksAndTwoExecutorsOverlap) {
  Executor a("stream-a");
  Executor b("stream-b");
  std::mutex gate;
  std::unique_lock held(gate);
  const uint64_t blocked = a.submit([&] { std::lock_guard wait_for_gate(gate); });
  EXPECT_FALSE(a.wait_for(blocked, in(30ms)));
  EXPECT_EQ(a.queued(), 1u);
  // b is not held up by a.
  std::atomic<bool> ran{false};
  ASSERT_TRUE(b.wait_for(b.submit([&] { ran = true; }), in(2000ms)));
  EXPECT_TRUE(ran.load());
  held.unlock();
  EXPECT_TRUE(a.wait_for(blocked, in(2000ms)));
}

TEST(Executor, ThrowingTaskCountsAsCompletedAndTheNextOneRuns) {
  Executor ex("test-throw");
  ex.submit([] { throw std::runtime_error("boom"); });
  std::atomic<bool> ran{false};
  ASSERT_TRUE(ex.wait_for(ex.submit([&] { ran = true; }), in(2000ms)));
  EXPECT_TRUE(ran.load());
}

TEST(Executor, CompletionCallbacksRunOnceTheirTaskHasRunOrAtOnce) {
  Executor ex("test-callback");
  std::mutex gate;
  std::unique_lock held(gate);
  const uint64_t first = ex.submit([&] { std::lock_guard wait_for_gate(gate); });
  std::atomic<int> fired{0};
  std::thread::id fired_on;
  ex.when_completed(first, [&] {
    fired_on = std::this_thread::get_id();
    fired.fetch_add(1);
  });
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(fired.load(), 0);  // its task is still running
  held.unlock();
  ASSERT_TRUE(ex.wait_for(ex.submit([] {}), in(2000ms)));
  EXPECT_EQ(fired.load(), 1);
  EXPECT_NE(fired_on, std::this_thread::get_id());
  bool at_once = false;
  ex.when_completed(first, [&] { at_once = true; });
  EXPECT_TRUE(at_once);
}

// A worker frees a stream's tensors in a completion callback; a command that waits
// for the stream (synchronize) must find them freed.
TEST(Executor, WaitingForATaskAlsoWaitsForItsCompletionCallbacks) {
  for (int round = 0; round < 200; ++round) {
    Executor ex("callbacks");
    std::atomic<bool> callback_ran{false};
    std::atomic<bool> release{false};
    const uint64_t seq = ex.submit([&] {
      while (!release.load()) std::this_thread::yield();
    });
    ex.when_completed(seq, [&] {
      std::this_thread::sleep_for(round % 2 == 0 ? 0ms : 1ms);
      callback_ran.store(true);
    });
    release.store(true);
    ASSERT_TRUE(ex.wait_for(seq, std::chrono::steady_clock::now() + 10s));
    EXPECT_TRUE(callback_ran.load()) << "round " << round;
  }
}

TEST(Executor, DestructionRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  {
    Executor ex("test-drain", Priority::High);
    EXPECT_EQ(ex.priority(), Priority::High);
    for (int i = 0; i < 50; ++i) ex.submit([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 50);
}

}  // namespace
}  // namespace thd::streams
