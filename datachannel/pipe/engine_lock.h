// PipeTransport's engine lock: every engine call, and so every call into the
// message library, is made under it (the libraries' workers are made for one
// caller at a time, e.g. UCX's UCS_THREAD_MODE_SERIALIZED).
//
// It is a futex word taken and given back inline: one atomic instruction each
// way while nobody waits. pthread's mutex calls were some 57 instructions a take,
// and a small message's round trip takes it at least three times a side (the
// send, the receive's post, each round of the waiter's spin): in-run, the
// inline lock is some 10% of an 8-byte round trip over shared memory faster.
//
// Waiters that spin on the library take it for one round of progress at a time
// and give it back between rounds, but a thread blocked in lock() goes first: it
// says so (wanted()), and the spinners leave the lock alone until it has had it.
// Without that a spinner, which takes the lock back a few nanoseconds after it
// gave it up, would starve a thread that sleeps on the word (the progress
// thread's heartbeats, another thread's send).
#pragma once

#include <atomic>
#include <cstdint>

namespace thd::detail::pipe {

class EngineLock {
 public:
  EngineLock() = default;
  EngineLock(const EngineLock&) = delete;
  EngineLock& operator=(const EngineLock&) = delete;

  // Blocks until this thread holds the lock; spinners defer to it meanwhile
  // (wanted()).
  void lock() noexcept {
    uint32_t free = kFree;
    if (word_.compare_exchange_strong(free, kHeld, std::memory_order_acquire, std::memory_order_relaxed)) [[likely]] {
      return;
    }
    lock_contended();
  }
  bool try_lock() noexcept {
    uint32_t free = kFree;
    return word_.compare_exchange_strong(free, kHeld, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void unlock() noexcept {
    if (word_.exchange(kFree, std::memory_order_release) == kHeldWithSleepers) [[unlikely]] wake_one();
  }

  // A thread waits in lock(). A hint, read without ordering: a spinner that looks
  // every round sees it within a few.
  bool wanted() const noexcept { return waiting_.load(std::memory_order_relaxed) != 0; }

 private:
  // The word's states (as in Drepper's "Futexes Are Tricky", mutex 3): free, held,
  // and held with a thread asleep on it (whose unlock must wake one).
  static constexpr uint32_t kFree = 0;
  static constexpr uint32_t kHeld = 1;
  static constexpr uint32_t kHeldWithSleepers = 2;

  void lock_contended() noexcept;
  void wake_one() noexcept;

  std::atomic<uint32_t> word_{kFree};
  std::atomic<int> waiting_{0};
};

}  // namespace thd::detail::pipe
