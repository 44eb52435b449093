// How often a spinning waiter gives its core away on a host with more ranks than
// cores (PipeTuning::yield_while_spinning).
//
// Yielding every round of the poll costs a sched_yield per round (about 0.5 us on
// this project's VM) even when no other thread wants the core: ranks 0 and 1 of a
// 4-rank job on 2 cores, ping-ponging while the other two sleep, took 1.3-1.9 us a
// round trip against 0.47 us without yielding. Not yielding at all made the same
// job's all_reduce, where every rank runs, 5x slower. So the interval between
// yields doubles, up to kMaxEvery rounds, while yields come back at once (nobody
// else ran), and drops to every round as soon as one took long enough to have run
// another thread (kGaveAway: a yield with no switch takes 0.5 us here, one that
// runs another process 2.8 us).
//
// Thread-safe: the waiters of one transport share it; a lost update only delays a
// step of the backoff.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace thd::detail::pipe {

class YieldBackoff {
 public:
  static constexpr uint32_t kMaxEvery = 256;
  static constexpr std::chrono::nanoseconds kGaveAway{1000};

  // Rounds of polling between two yields.
  uint32_t every() const noexcept { return every_.load(std::memory_order_relaxed); }
  // A yield that took `took`.
  void record(std::chrono::nanoseconds took) noexcept {
    const uint32_t next = took < kGaveAway ? std::min(every() * 2, kMaxEvery) : 1U;
    every_.store(next, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint32_t> every_{1};
};

}  // namespace thd::detail::pipe
