// How often a spinning waiter gives its core away on a host with more ranks than
// cores (PipeTuning::yield_while_spinning).
//
// Yielding every round of the poll costs a sched_yield per round even when no
// other thread wants the core (about 0.5 us on the project's 2-core VM): ranks 0
// and 1 of a 4-rank job on 2 cores, ping-ponging while the other two sleep, took
// 1.3-1.9 us a round trip against 0.47 us without yielding. Not yielding at all
// made the same job's all_reduce, where every rank runs, 5x slower. So the
// interval between yields doubles, up to kMaxEvery rounds, while yields come back
// at once (nobody else ran), and drops to every round as soon as one took long
// enough to have run another thread. What "long enough" is depends on the machine
// (a yield with no switch took 0.5 us on the VM, one that ran another process
// 2.8 us): measure_yield_switch() times this host's yields at start-up, and
// THD_PIPE_YIELD_SWITCH_NS sets it instead.
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

  // `gave_away`: a yield that took at least this long ran another thread.
  explicit YieldBackoff(std::chrono::nanoseconds gave_away) noexcept : gave_away_(gave_away) {}

  std::chrono::nanoseconds gave_away() const noexcept { return gave_away_; }
  // Rounds of polling between two yields.
  uint32_t every() const noexcept { return every_.load(std::memory_order_relaxed); }
  // A yield that took `took`.
  void record(std::chrono::nanoseconds took) noexcept {
    const uint32_t next = took < gave_away_ ? std::min(every() * 2, kMaxEvery) : 1U;
    every_.store(next, std::memory_order_relaxed);
  }

 private:
  const std::chrono::nanoseconds gave_away_;
  std::atomic<uint32_t> every_{1};
};

// The threshold for YieldBackoff on a host whose fastest sched_yield took
// `fastest_yield`: twice that (a yield that switched to another thread costs a
// context switch more than one that did not), kept within [250 ns, 20 us] so a
// start-up on a loaded host (every yield switching) cannot make it absurd.
std::chrono::nanoseconds yield_switch_threshold(std::chrono::nanoseconds fastest_yield);
// The threshold on this host: yield_switch_threshold of the fastest of a few dozen
// sched_yield calls timed now.
std::chrono::nanoseconds measure_yield_switch();

}  // namespace thd::detail::pipe
