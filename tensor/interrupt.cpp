#include <thd/interrupt.h>

#include <atomic>

namespace thd {

namespace {
std::atomic<InterruptCheck> g_check{nullptr};
}  // namespace

void set_interrupt_check(InterruptCheck check) noexcept { g_check.store(check, std::memory_order_release); }

namespace detail {

bool interrupt_check_installed() noexcept { return g_check.load(std::memory_order_acquire) != nullptr; }

void check_interrupt() {
  if (InterruptCheck check = g_check.load(std::memory_order_acquire)) check();
}

}  // namespace detail
}  // namespace thd
