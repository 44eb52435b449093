// EngineMutex (pipe/engine_mutex.h): mutual exclusion, try_lock, and sleepers
// woken by the unlock that frees the lock.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "datachannel/pipe/engine_mutex.h"

namespace thd::detail::pipe {
namespace {

using namespace std::chrono_literals;

TEST(EngineMutex, ThreadsNeverHoldItTogether) {
  EngineMutex mu;
  int64_t counter = 0;  // unguarded but for the lock: lost updates show a broken one
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  constexpr int kThreads = 4;  // more than this machine's cores: holders get preempted
  constexpr int kRounds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        std::unique_lock lock(mu, std::defer_lock);
        if ((i + t) % 3 == 0) {
          while (!lock.try_lock()) std::this_thread::yield();
        } else {
          lock.lock();
        }
        if (inside.fetch_add(1) != 0) overlap = true;
        ++counter;
        inside.fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(counter, int64_t{kThreads} * kRounds);
}

TEST(EngineMutex, TryLockFailsWhileHeldAndSucceedsAfter) {
  EngineMutex mu;
  mu.lock();
  std::thread other([&] { EXPECT_FALSE(mu.try_lock()); });
  other.join();
  mu.unlock();
  EXPECT_TRUE(mu.try_lock());
  mu.unlock();
}

// Waiters that gave up spinning sleep; each unlock must let one of them in.
TEST(EngineMutex, SleepingWaitersAreWokenByTheUnlock) {
  EngineMutex mu;
  mu.lock();
  std::atomic<int> got{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([&] {
      std::lock_guard lock(mu);
      got.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(50ms);  // long past their spin: asleep
  EXPECT_EQ(got.load(), 0);
  const auto start = std::chrono::steady_clock::now();
  mu.unlock();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(got.load(), 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

}  // namespace
}  // namespace thd::detail::pipe
