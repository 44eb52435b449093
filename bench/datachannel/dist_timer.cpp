#include "bench/datachannel/dist_timer.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace thd::bench::dc {
namespace {

// A batch that long (of a repetition) sizes the repetitions.
constexpr double kSizingFraction = 0.25;
constexpr int64_t kMaxCalls = int64_t{1} << 30;

std::string text(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

}  // namespace

DistTimer::DistTimer(std::shared_ptr<Store> store, int rank, int world_size, Options options, std::ostream& diag)
    : store_(std::move(store)), rank_(rank), world_size_(world_size), options_(std::move(options)), diag_(diag) {}

std::string DistTimer::next_key(const char* what) { return fmt::format("bench/{}/{}", sequence_++, what); }

void DistTimer::barrier() {
  const std::string key = next_key("barrier");
  if (store_->add(key, 1) == world_size_) store_->set(key + "/all", std::string_view("1"));
  store_->wait({key + "/all"});
}

double DistTimer::slowest(double mine) {
  const std::string key = next_key("time");
  store_->set(fmt::format("{}/{}", key, rank_), fmt::format("{:.17g}", mine));
  if (rank_ != 0) return mine;
  double worst = mine;
  for (int r = 1; r < world_size_; ++r) {
    worst = std::max(worst, std::stod(text(store_->get(fmt::format("{}/{}", key, r)))));
  }
  return worst;
}

int64_t DistTimer::from_rank0(int64_t value) {
  const std::string key = next_key("value");
  if (rank_ == 0) {
    store_->set(key, std::to_string(value));
    return value;
  }
  return std::stoll(text(store_->get(key)));
}

double DistTimer::time_calls(const DistCase& c, int64_t calls) {
  barrier();
  const auto t0 = std::chrono::steady_clock::now();
  c.run(calls);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Never 0: a zero time would print as an infinite rate.
  return slowest(std::max(s, 1e-9) / static_cast<double>(calls));
}

int64_t DistTimer::size_repetition(const DistCase& c) {
  // One call is not enough to go by: the ranks leave the barrier up to a store
  // round trip apart, which would dwarf a short call. Doubling the batch until it
  // takes a good part of a repetition makes that skew small.
  int64_t calls = 1;
  for (;;) {
    const double per_call = time_calls(c, calls);
    // Rank 0 knows the slowest rank's time, and decides for all: every rank must
    // make the same calls.
    const bool enough = per_call * static_cast<double>(calls) >= kSizingFraction * options_.rep_seconds ||
                        calls >= kMaxCalls / 2;
    const int64_t next = from_rank0(
        enough ? std::clamp<int64_t>(static_cast<int64_t>(std::ceil(options_.rep_seconds / per_call)), 1, kMaxCalls)
               : -2 * calls);
    if (next > 0) {
      return grow_short_repetition(
          next, options_.rep_seconds, [&](int64_t n) { return time_calls(c, n); },
          [&](int64_t n) { return from_rank0(n); });
    }
    calls = -next;
  }
}

double DistTimer::paired_ratio(size_t a, size_t b) const {
  if (a >= last_samples_.size() || b >= last_samples_.size()) return std::numeric_limits<double>::quiet_NaN();
  const std::vector<double>& x = last_samples_[a];
  const std::vector<double>& y = last_samples_[b];
  if (x.empty() || x.size() != y.size()) return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> ratios(x.size());
  for (size_t r = 0; r < x.size(); ++r) ratios[r] = x[r] / y[r];
  return statistic_of(std::move(ratios), Statistic::Median);
}

std::vector<double> DistTimer::time(const Context& ctx, const std::vector<DistCase>& cases) {
  last_samples_.clear();
  const size_t n = cases.size();
  std::vector<double> result(n, std::numeric_limits<double>::quiet_NaN());
  std::vector<int64_t> calls(n, 0);
  std::vector<std::vector<double>> samples(n);
  std::vector<bool> measured(n, false);
  for (size_t c = 0; c < n; ++c) {
    if (!ctx.enabled(cases[c].name)) continue;
    if (cases[c].measure) {
      measured[c] = !options_.quick;
      continue;
    }
    (void)time_calls(cases[c], 1);  // warm-up: connections, buffers, first touch
    if (options_.quick) {
      const double once = time_calls(cases[c], 1);
      if (rank_ == 0) result[c] = once;
      continue;
    }
    calls[c] = size_repetition(cases[c]);
  }
  if (options_.quick) return result;
  for (int r = 0; r < options_.reps; ++r) {
    for (size_t c = 0; c < n; ++c) {
      if (calls[c] > 0) samples[c].push_back(time_calls(cases[c], calls[c]));
      // The others finished their part of the case before (rank 0 read their times).
      if (measured[c] && rank_ == 0) samples[c].push_back(cases[c].measure());
    }
  }
  if (rank_ != 0) return result;
  last_samples_ = samples;
  for (size_t c = 0; c < n; ++c) {
    if (samples[c].empty()) continue;
    result[c] = statistic_of(samples[c], options_.stat);
    if (options_.verbose) {
      if (measured[c]) {
        fmt::print(diag_, "# {}: measured, s/call:", cases[c].name);
      } else {
        fmt::print(diag_, "# {}: {} calls per rep, s/call (slowest rank):", cases[c].name, calls[c]);
      }
      for (double s : samples[c]) fmt::print(diag_, " {:.4g}", s);
      fmt::print(diag_, "\n");
    }
  }
  return result;
}

}  // namespace thd::bench::dc
