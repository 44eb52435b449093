#include "datachannel/pipe/engine_mutex.h"

#include "datachannel/net/cpu_relax.h"

namespace thd::detail::pipe {

namespace {

// A holder of the engine lock lets go within a microsecond or so; this many
// looks at it cost about that much before a waiter sleeps.
constexpr int kSpins = 100;

}  // namespace

void EngineMutex::lock_contended(uint32_t seen) noexcept {
  for (int i = 0; i < kSpins; ++i) {
    if (seen == 0 &&
        state_.compare_exchange_weak(seen, 1, std::memory_order_acquire, std::memory_order_relaxed)) {
      return;
    }
    net::cpu_relax();
    seen = state_.load(std::memory_order_relaxed);
  }
  // Sleep, with the lock marked contended (2) so that its holder's unlock wakes a
  // sleeper. Taken here, it stays marked: this thread's own unlock may then wake
  // another for nothing, which is harmless.
  if (seen != 2) seen = state_.exchange(2, std::memory_order_acquire);
  while (seen != 0) {
    state_.wait(2, std::memory_order_relaxed);
    seen = state_.exchange(2, std::memory_order_acquire);
  }
}

void EngineMutex::wake_one() noexcept { state_.notify_one(); }

}  // namespace thd::detail::pipe
