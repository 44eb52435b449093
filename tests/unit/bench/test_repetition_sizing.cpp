// How the harness's timers size their repetitions (Context::time in one process,
// DistTimer across ranks, here one), with cases whose speed the test sets: never
// their timings, only how many calls a repetition makes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <thd/store.h>

#include "bench/datachannel/dist_timer.h"

namespace thd::bench::dc {
namespace {

using Clock = std::chrono::steady_clock;

void spin_for(std::chrono::nanoseconds d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
  }
}

// A case of calls that take `per_call` each, but whose `stall_on`-th batch (0:
// the warm-up, 1: the first sizing batch) first stalls for `stall`.
struct StallingCase {
  std::chrono::nanoseconds per_call{std::chrono::microseconds(1)};
  int stall_on = 1;  // -1: never
  std::chrono::milliseconds stall{60};
  int batches = 0;
  std::vector<int64_t> calls_of_batch;

  DistCase make() {
    return {"dc.test.stall", [this](int64_t calls) {
              if (batches++ == stall_on) std::this_thread::sleep_for(stall);
              calls_of_batch.push_back(calls);
              for (int64_t i = 0; i < calls; ++i) spin_for(per_call);
            }};
  }
};

Options options(double rep_seconds, int reps) {
  Options o;
  o.rep_seconds = rep_seconds;
  o.reps = reps;
  return o;
}

// A DistTimer of a one-rank job, and the case it times.
struct OneRankTiming {
  explicit OneRankTiming(const Options& options) : o(options), ctx(o, out, diag), timer(store, 0, 1, o, diag) {}
  std::vector<double> time() { return timer.time(ctx, {c.make()}); }

  const Options o;
  std::ostringstream out, diag;
  Context ctx;
  std::shared_ptr<Store> store = std::make_shared<HashStore>();
  DistTimer timer;
  StallingCase c;
};

TEST(DistTimer, AStallWhileSizingDoesNotLeaveRepetitionsOfAFewCalls) {
  OneRankTiming job(options(0.04, 3));
  const Options& o = job.o;
  const StallingCase& c = job.c;
  const std::vector<double> t = job.time();
  ASSERT_EQ(t.size(), 1u);
  ASSERT_GE(c.calls_of_batch.size(), static_cast<size_t>(o.reps));
  // The stall made the first sizing batch's one call look 60 ms long: sized by it
  // alone, a repetition was one call. At 1 us a call, half of 40 ms is 20000 (the
  // bound leaves room for a loaded machine's slower calls).
  const int64_t rep_calls = c.calls_of_batch.back();
  EXPECT_GE(rep_calls, 1000) << "a repetition makes " << rep_calls << " calls";
  for (size_t i = c.calls_of_batch.size() - static_cast<size_t>(o.reps); i < c.calls_of_batch.size(); ++i) {
    EXPECT_EQ(c.calls_of_batch[i], rep_calls) << "every repetition makes the same calls";
  }
}

TEST(DistTimer, ARepetitionSizedRightIsTimedOnceMoreAndKept) {
  OneRankTiming job(options(0.02, 2));
  const StallingCase& c = job.c;
  job.c.stall_on = -1;  // never
  job.time();
  // Warm-up, the doubling batches, one check of the sized count, the repetitions.
  const size_t n = c.calls_of_batch.size();
  ASSERT_GE(n, 4u);
  const int64_t rep_calls = c.calls_of_batch[n - 1];
  EXPECT_EQ(c.calls_of_batch[n - 2], rep_calls);
  EXPECT_EQ(c.calls_of_batch[n - 3], rep_calls) << "the check timed the count the repetitions use";
  EXPECT_NE(c.calls_of_batch[n - 4], rep_calls) << "the count was checked once, not grown";
}

TEST(ContextTime, AStallInTheSizingCallDoesNotLeaveRepetitionsOfAFewCalls) {
  Options o = options(0.04, 3);
  std::ostringstream out, diag;
  Context ctx(o, out, diag);
  // Warm-up, then the one call that sizes the repetitions: it stalls for 60 ms.
  constexpr std::chrono::milliseconds kStall{60};
  int calls = 0;
  const std::vector<double> t = ctx.time({{"test.stall", [&] {
                                             if (calls++ == 1) std::this_thread::sleep_for(kStall);
                                             spin_for(std::chrono::microseconds(1));
                                           }}});
  ASSERT_EQ(t.size(), 1u);
  // Sized by the stalled call alone, a repetition was one call and the whole
  // timing five calls; at 1 us a call, half of 40 ms is 20000 calls a repetition
  // (the bound leaves room for a loaded machine's slower calls).
  EXPECT_GE(calls, 3 * 1000) << "the timing made " << calls << " calls in all";
}

}  // namespace
}  // namespace thd::bench::dc
