#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tensor/parallel.h"

namespace thd::detail {
namespace {

TEST(Parallel, CoversRangeExactlyOnce) {
  for (int64_t n : {0, 1, 7, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    parallel_for(0, n, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(Parallel, SmallRangesStayOnCaller) {
  std::thread::id caller = std::this_thread::get_id(), seen;
  parallel_for(0, 100, 1000, [&](int64_t, int64_t) { seen = std::this_thread::get_id(); });
  EXPECT_EQ(seen, caller);
}

TEST(Parallel, NestedCallsRunSerially) {
  std::atomic<int64_t> total{0};
  parallel_for(0, 64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      EXPECT_TRUE(in_parallel_region());
      parallel_for(0, 10, 1, [&](int64_t ib, int64_t ie) { total += ie - ib; });
    }
  });
  EXPECT_EQ(total.load(), 640);
  EXPECT_FALSE(in_parallel_region());
}

TEST(Parallel, PropagatesExceptions) {
  EXPECT_THROW(parallel_for(0, 1000, 1,
                            [](int64_t b, int64_t) {
                              if (b == 0) throw std::runtime_error("chunk failed");
                            }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int64_t> sum{0};
  parallel_for(0, 1000, 1, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 1000);
}

TEST(Parallel, ConcurrentCallersShareThePool) {
  std::vector<std::thread> users;
  std::atomic<int64_t> sum{0};
  for (int t = 0; t < 4; ++t) {
    users.emplace_back([&] {
      for (int r = 0; r < 50; ++r) parallel_for(0, 4096, 64, [&](int64_t b, int64_t e) { sum += e - b; });
    });
  }
  for (auto& u : users) u.join();
  EXPECT_EQ(sum.load(), 4 * 50 * 4096);
}

TEST(Parallel, ACallerFindingThePoolBusyRunsItsWorkItselfInsteadOfWaiting) {
  if (num_threads() < 2) GTEST_SKIP() << "one thread: nothing runs in the pool";
  std::atomic<bool> release{false};
  std::atomic<bool> holding{false};
  // One caller holds the pool with a job whose chunks wait for a flag.
  std::thread holder([&] {
    parallel_for(0, int64_t{1} << 20, 1, [&](int64_t, int64_t) {
      holding = true;
      while (!release.load()) std::this_thread::yield();
    });
  });
  while (!holding.load()) std::this_thread::yield();
  // Another caller's work must not wait for that job (it would never finish here).
  std::vector<std::thread::id> ran_on;
  std::atomic<int64_t> covered{0};
  std::atomic<bool> done{false};
  std::thread other([&] {
    parallel_for(0, int64_t{1} << 20, 1, [&](int64_t b, int64_t e) {
      ran_on.push_back(std::this_thread::get_id());
      covered += e - b;
    });
    done = true;
  });
  // It finishes while the first job still holds the pool (bounded: released anyway
  // after 5 s, so a regression fails instead of hanging).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  const bool finished_first = done.load();
  release = true;
  other.join();
  holder.join();
  EXPECT_TRUE(finished_first) << "the second caller waited for the first caller's job";
  EXPECT_EQ(covered.load(), int64_t{1} << 20);
  EXPECT_EQ(ran_on.size(), 1u);  // in one piece, on its own thread
}

}  // namespace
}  // namespace thd::detail
