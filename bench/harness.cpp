#include "bench/harness.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <ostream>
#include <stdexcept>

namespace thd::bench {
namespace {

// Function-local so suites may register from static initializers in any order.
std::map<std::string, Suite>& registry() {
  static std::map<std::string, Suite> r;
  return r;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Seconds per call over `iters` back-to-back calls.
double time_calls(const std::function<void()>& body, int64_t iters) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; ++i) body();
  // Never 0: a zero time would print as an infinite rate.
  return std::max(seconds_since(t0), 1e-9) / static_cast<double>(iters);
}

// A sized repetition must take at least this much of rep_seconds; it is checked
// this many times at most, the count growing at least this much each time.
constexpr double kShortestRepetition = 0.5;
constexpr int kRepetitionChecks = 8;
constexpr int64_t kCheckGrowth = 4;
constexpr int64_t kMaxCalls = int64_t{1} << 30;

}  // namespace

double statistic_of(std::vector<double> v, Statistic stat) {
  std::sort(v.begin(), v.end());
  if (stat == Statistic::Min) return v.front();
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int64_t grow_short_repetition(int64_t calls, double rep_seconds, const std::function<double(int64_t)>& time,
                              const std::function<int64_t(int64_t)>& agree) {
  for (int check = 0; check < kRepetitionChecks; ++check) {
    const double per_call = time(calls);
    const bool long_enough =
        per_call * static_cast<double>(calls) >= kShortestRepetition * rep_seconds || calls >= kMaxCalls / kCheckGrowth;
    const int64_t grown = std::max(kCheckGrowth * calls, static_cast<int64_t>(std::ceil(rep_seconds / per_call)));
    const int64_t next = agree(long_enough ? calls : std::min(grown, kMaxCalls));
    if (next == calls) return calls;
    calls = next;
  }
  return calls;
}

Context::Context(Options options, std::ostream& out, std::ostream& diag)
    : options_(std::move(options)), out_(out), diag_(diag) {}

bool Context::enabled(std::string_view name) const {
  const std::string& f = options_.filter;
  return f.empty() || name.find(f) != std::string_view::npos ||
         group_.find(f) != std::string::npos;
}

std::vector<double> Context::time(const std::vector<Case>& cases) {
  const size_t n = cases.size();
  std::vector<double> result(n, std::numeric_limits<double>::quiet_NaN());
  std::vector<int64_t> iters(n, 0);
  std::vector<std::vector<double>> samples(n);
  // Warm-up (first-touch of buffers, thread pool start, BLAS buffers), then one timed
  // call to size the repetitions.
  for (size_t c = 0; c < n; ++c) {
    if (!enabled(cases[c].name)) continue;
    cases[c].body();
    const double once = time_calls(cases[c].body, 1);
    if (options_.quick) {
      result[c] = once;
      continue;
    }
    const int64_t sized = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(options_.rep_seconds / once)));
    iters[c] = grow_short_repetition(
        sized, options_.rep_seconds, [&](int64_t calls) { return time_calls(cases[c].body, calls); },
        [](int64_t calls) { return calls; });
  }
  if (options_.quick) return result;
  for (int r = 0; r < options_.reps; ++r) {
    for (size_t c = 0; c < n; ++c) {
      if (iters[c] == 0) continue;
      samples[c].push_back(time_calls(cases[c].body, iters[c]));
    }
  }
  for (size_t c = 0; c < n; ++c) {
    if (samples[c].empty()) continue;
    result[c] = statistic_of(samples[c], options_.stat);
    if (options_.verbose) {
      fmt::print(diag_, "# {}: {} calls per rep, s/call:", cases[c].name, iters[c]);
      for (double s : samples[c]) fmt::print(diag_, " {:.4g}", s);
      fmt::print(diag_, "\n");
    }
  }
  return result;
}

void Context::report(std::string_view name, double value, std::string_view unit) {
  if (!enabled(name) || !std::isfinite(value)) return;
  fmt::print(out_, "{} {:.2f} {}\n", name, value, unit);
  out_.flush();
}

bool register_suite(Suite suite) {
  std::string name = suite.name;
  if (!registry().emplace(name, std::move(suite)).second) {
    throw std::logic_error("thd-bench: suite '" + name + "' registered twice");
  }
  return true;
}

std::vector<Suite> suites() {
  std::vector<Suite> out;
  for (const auto& [name, suite] : registry()) out.push_back(suite);
  return out;
}

int64_t suite_integer_arg(const Options& opt, const std::string& flag, std::optional<int64_t> fallback, int64_t lo,
                          int64_t hi) {
  const auto it = opt.suite_args.find(flag);
  if (it == opt.suite_args.end()) {
    if (!fallback) throw std::invalid_argument(flag + " is required");
    return *fallback;
  }
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(it->second, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  if (used == 0 || used != it->second.size() || v < lo || v > hi) {
    throw std::invalid_argument(fmt::format("{} must be an integer in {}..{}, got '{}'", flag, lo, hi, it->second));
  }
  return v;
}

}  // namespace thd::bench
