// EngineLock (engine_lock.h): mutual exclusion between threads that block and
// threads that only try, and a holder learns that another thread waits for it.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "datachannel/pipe/engine_lock.h"

namespace thd::test {
namespace {

using namespace std::chrono_literals;
using detail::pipe::EngineLock;

TEST(EngineLock, NobodyWantsAFreeOrUncontendedLock) {
  EngineLock lock;
  EXPECT_FALSE(lock.wanted());
  ASSERT_TRUE(lock.try_lock());
  EXPECT_FALSE(lock.wanted());
  EXPECT_FALSE(lock.try_lock());
  lock.unlock();
  lock.lock();  // free: taken at once, without a word to anyone
  EXPECT_FALSE(lock.wanted());
  lock.unlock();
}

TEST(EngineLock, AHolderSeesAWaitingThreadAndHandsTheLockOver) {
  EngineLock lock;
  lock.lock();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    std::lock_guard guard(lock);
    got.store(true);
  });
  // The holder looks at wanted() as a spinning waiter does between its rounds.
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!lock.wanted() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  ASSERT_TRUE(lock.wanted()) << "a thread blocked in lock() for 10 s was never seen";
  EXPECT_FALSE(got.load());
  lock.unlock();
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_FALSE(lock.wanted()) << "the waiter got the lock but still counts as waiting";
  // A holder that saw wanted() and let go takes the lock back once it is free.
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
}

TEST(EngineLock, SeveralWaitersAllCountUntilTheLastGetsIt) {
  EngineLock lock;
  lock.lock();
  constexpr int kWaiters = 3;
  std::atomic<int> done{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&] {
      std::lock_guard guard(lock);
      done.fetch_add(1);
    });
  }
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!lock.wanted() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  ASSERT_TRUE(lock.wanted());
  lock.unlock();
  for (auto& w : waiters) w.join();
  EXPECT_EQ(done.load(), kWaiters);
  EXPECT_FALSE(lock.wanted());
}

// Threads that block in lock() and threads that spin on try_lock() (as waiters
// do, deferring to wanted()) never hold it at once: a plain counter each of them
// bumps in two steps under the lock ends exact.
TEST(EngineLock, BlockingAndTryingThreadsExcludeEachOther) {
  EngineLock lock;
  constexpr int kEach = 20000;
  int64_t counter = 0;  // guarded by `lock`
  std::atomic<bool> inside{false};
  std::atomic<int> overlaps{0};
  auto critical = [&] {
    if (inside.exchange(true)) overlaps.fetch_add(1);
    const int64_t seen = counter;
    if ((seen & 63) == 0) std::this_thread::yield();  // let the others pile up on the word
    counter = seen + 1;
    inside.store(false);
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&] {
      for (int n = 0; n < kEach; ++n) {
        std::lock_guard guard(lock);
        critical();
      }
    });
    threads.emplace_back([&] {
      for (int n = 0; n < kEach;) {
        if (lock.wanted() || !lock.try_lock()) continue;
        critical();
        lock.unlock();
        ++n;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counter, 4 * kEach);
  EXPECT_FALSE(lock.wanted());
}

}  // namespace
}  // namespace thd::test
