#include "datachannel/pipe/yield_backoff.h"

#include <sched.h>

namespace thd::detail::pipe {

std::chrono::nanoseconds yield_switch_threshold(std::chrono::nanoseconds fastest_yield) {
  return std::clamp(2 * fastest_yield, std::chrono::nanoseconds(250), std::chrono::nanoseconds(20'000));
}

std::chrono::nanoseconds measure_yield_switch() {
  using Clock = std::chrono::steady_clock;
  constexpr int kSamples = 64;
  auto fastest = std::chrono::nanoseconds::max();
  for (int i = 0; i < kSamples; ++i) {
    const auto before = Clock::now();
    sched_yield();
    fastest = std::min(fastest, std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - before));
  }
  return yield_switch_threshold(fastest);
}

}  // namespace thd::detail::pipe
