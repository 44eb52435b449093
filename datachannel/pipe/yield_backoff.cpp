#include "datachannel/pipe/yield_backoff.h"

#include <sched.h>

namespace thd::detail::pipe {

std::chrono::nanoseconds measure_yield_switch() {
  using Clock = std::chrono::steady_clock;
  constexpr int kSamples = 64;
  auto fastest = std::chrono::nanoseconds::max();
  for (int i = 0; i < kSamples; ++i) {
    const auto before = Clock::now();
    sched_yield();
    fastest = std::min(fastest, std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - before));
  }
  return std::clamp(2 * fastest, std::chrono::nanoseconds(250), std::chrono::nanoseconds(20'000));
}

}  // namespace thd::detail::pipe
