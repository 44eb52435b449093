// The engine lock of PipeTransport: a mutex whose uncontended lock, try_lock and
// unlock are one atomic instruction each, inline. std::mutex goes through calls
// into the C library for each, and a small message's round trip takes and drops
// the engine lock several times on its latency path.
//
// Waiters spin briefly, then sleep on the lock word (C++20 atomic wait, a futex
// on Linux). The state is 0 (free), 1 (held) or 2 (held, and someone may sleep):
// only an unlock that finds 2 wakes anyone (U. Drepper, "Futexes Are Tricky",
// mutex 3).
#pragma once

#include <atomic>
#include <cstdint>

namespace thd::detail::pipe {

class EngineMutex {
 public:
  EngineMutex() = default;
  EngineMutex(const EngineMutex&) = delete;
  EngineMutex& operator=(const EngineMutex&) = delete;

  bool try_lock() noexcept {
    uint32_t free = 0;
    return state_.compare_exchange_strong(free, 1, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void lock() noexcept {
    uint32_t seen = 0;
    if (state_.compare_exchange_strong(seen, 1, std::memory_order_acquire, std::memory_order_relaxed)) return;
    lock_contended(seen);
  }
  void unlock() noexcept {
    if (state_.exchange(0, std::memory_order_release) == 2) wake_one();
  }

  // Someone sleeps waiting for the lock (or is about to). A thread that takes the
  // lock again at once after each unlock wins it every time before the woken
  // sleeper runs: such a thread looks here and lets the sleeper in (held()).
  bool contended() const noexcept { return state_.load(std::memory_order_relaxed) == 2; }
  bool held() const noexcept { return state_.load(std::memory_order_relaxed) != 0; }

 private:
  void lock_contended(uint32_t seen) noexcept;
  void wake_one() noexcept;

  std::atomic<uint32_t> state_{0};
};

}  // namespace thd::detail::pipe
