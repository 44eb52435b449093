#include "datachannel/spin_policy.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "datachannel/check.h"
#include "datachannel/net/socket.h"
#include "tensor/env_setting.h"

namespace thd::detail {

using std::chrono::microseconds;
using std::chrono::nanoseconds;

namespace {

constexpr microseconds kMaxSpinSetting{1'000'000};

}  // namespace

SpinPolicy::SpinPolicy(microseconds budget, bool oversubscribed)
    : budget_(budget), pause_(oversubscribed ? kMaxPause : 0) {}

nanoseconds SpinPolicy::budget() noexcept {
  if (budget_.count() == 0) return nanoseconds{0};
  const int pause = pause_.load(std::memory_order_relaxed);
  if (pause == 0) return nanoseconds(budget_);
  // Paused: block, and probe with a spin once per pause.
  if (blocked_.fetch_add(1, std::memory_order_relaxed) + 1 < pause) return nanoseconds{0};
  blocked_.store(0, std::memory_order_relaxed);
  return nanoseconds(budget_);
}

void SpinPolicy::record_spin(Outcome outcome, bool machine_busy) noexcept {
  // Racing updates from several waiters may lose a step; the pause converges anyway.
  const int pause = pause_.load(std::memory_order_relaxed);
  int next = pause;
  switch (outcome) {
    case Outcome::Completed:
      next = pause / 2;
      break;
    case Outcome::RanOut:
      if (machine_busy) next = std::min(pause + 1, kMaxPause);
      break;
    case Outcome::Descheduled:
      next = std::min(2 * pause + 1, kMaxPause);
      break;
  }
  pause_.store(next, std::memory_order_relaxed);
}

RunQueue::RunQueue(int cpus) : cpus_(cpus) { fd_ = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC); }

RunQueue::~RunQueue() {
  if (fd_ >= 0) ::close(fd_);
}

bool RunQueue::busy() noexcept {
  const int64_t now = std::chrono::duration_cast<nanoseconds>(net::Clock::now().time_since_epoch()).count();
  // One thread samples; the others use the last sample meanwhile.
  if (now >= next_sample_ns_.load(std::memory_order_relaxed) && !sampling_.exchange(true)) {
    char buf[128];
    const ssize_t n = fd_ >= 0 ? ::pread(fd_, buf, sizeof(buf) - 1, 0) : -1;
    const int runnable = n > 0 ? parse_runnable(std::string_view(buf, static_cast<size_t>(n))) : -1;
    busy_.store(runnable < 0 || runnable > cpus_, std::memory_order_relaxed);
    next_sample_ns_.store(now + nanoseconds(kSampleInterval).count(), std::memory_order_relaxed);
    sampling_.store(false);
  }
  return busy_.load(std::memory_order_relaxed);
}

int parse_runnable(std::string_view loadavg) {
  // The fourth field: runnable/total.
  size_t pos = 0;
  for (int field = 0; field < 3; ++field) {
    pos = loadavg.find(' ', pos);
    if (pos == std::string_view::npos) return -1;
    ++pos;
  }
  const size_t slash = loadavg.find('/', pos);
  if (slash == std::string_view::npos || slash == pos) return -1;
  int value = -1;
  auto [end, ec] = std::from_chars(loadavg.data() + pos, loadavg.data() + slash, value);
  if (ec != std::errc() || end != loadavg.data() + slash || value < 0) return -1;
  return value;
}

std::optional<microseconds> parse_spin_us(const std::optional<std::string>& value) {
  const WholeNumberSetting setting{.name = "THD_TCP_SPIN_US",
                                   .max = static_cast<uint64_t>(kMaxSpinSetting.count()),
                                   .unit = "microseconds",
                                   .min_note = "never spin"};
  const auto us = parse_whole_number(setting, value, "tcp backend");
  if (!us) return std::nullopt;
  return microseconds(static_cast<int64_t>(*us));
}

int usable_cpus() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace thd::detail
