#include "datachannel/pipe/engine_lock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace thd::detail::pipe {

namespace {

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) noexcept {
  // Returns at once when the word no longer holds `expected`, on a wake, or on a
  // signal: the caller looks again either way.
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

}  // namespace

void EngineLock::lock_contended() noexcept {
  // Counted before the first sleep: spinning waiters then leave the lock to this
  // thread rather than take it back between their rounds.
  waiting_.fetch_add(1, std::memory_order_relaxed);
  // Marked as slept on: whoever unlocks next wakes a sleeper. A thread that takes
  // the lock this way leaves the mark, which costs at most one wake-up for nobody.
  while (word_.exchange(kHeldWithSleepers, std::memory_order_acquire) != kFree) {
    futex_wait(&word_, kHeldWithSleepers);
  }
  waiting_.fetch_sub(1, std::memory_order_relaxed);
}

void EngineLock::wake_one() noexcept {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

}  // namespace thd::detail::pipe
