// DistTimer's measured cases (DistCase::measure): a reference the ranks do not time
// (ucx_perftest's round trip) takes its turn in every repetition, on rank 0 only,
// and pairs with the timed cases repetition by repetition.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <thd/store.h>

#include "bench/datachannel/dist_timer.h"

namespace thd::bench::dc {
namespace {

Options options(int reps) {
  Options o;
  o.rep_seconds = 0.002;
  o.reps = reps;
  return o;
}

// What the cases saw, in the order they saw it.
struct Log {
  std::vector<char> turns;  // 't' a timed repetition's batch, 'm' a measurement
  std::vector<double> measured;
};

// A timed case of empty calls, and a measured one returning 1, 2, 3... microseconds.
std::vector<DistCase> cases(Log& log) {
  return {{"dc.test.timed", [&log](int64_t) { log.turns.push_back('t'); }},
          {"ref.test.measured", nullptr, [&log] {
             log.turns.push_back('m');
             log.measured.push_back(1e-6 * static_cast<double>(log.measured.size() + 1));
             return log.measured.back();
           }}};
}

TEST(DistTimerMeasuredCase, RunsOnceARepetitionAfterTheTimedCaseAndPairsWithIt) {
  const Options o = options(5);
  std::ostringstream out, diag;
  Context ctx(o, out, diag);
  DistTimer timer(std::make_shared<HashStore>(), 0, 1, o, diag);
  Log log;
  const std::vector<double> t = timer.time(ctx, cases(log));
  ASSERT_EQ(log.measured.size(), 5u) << "one measurement a repetition";
  // The last ten turns are the repetitions: the timed case, then the measurement.
  ASSERT_GE(log.turns.size(), 10u);
  for (size_t i = log.turns.size() - 10; i < log.turns.size(); i += 2) {
    EXPECT_EQ(log.turns[i], 't');
    EXPECT_EQ(log.turns[i + 1], 'm');
  }
  EXPECT_DOUBLE_EQ(t[1], 3e-6) << "the median of 1..5 us";
  // Repetition by repetition: timed / measured, whose median is not t[0] / t[1].
  const double paired = timer.paired_ratio(0, 1);
  ASSERT_TRUE(std::isfinite(paired));
  EXPECT_GT(paired, 0);
}

TEST(DistTimerMeasuredCase, IsNotMeasuredUnderQuickNorWhenFilteredOut) {
  for (const bool quick : {true, false}) {
    Options o = options(3);
    o.quick = quick;
    if (!quick) o.filter = "dc.test";
    std::ostringstream out, diag;
    Context ctx(o, out, diag);
    DistTimer timer(std::make_shared<HashStore>(), 0, 1, o, diag);
    Log log;
    const std::vector<double> t = timer.time(ctx, cases(log));
    EXPECT_TRUE(log.measured.empty()) << "quick " << quick;
    EXPECT_TRUE(std::isnan(t[1])) << "quick " << quick;
    EXPECT_TRUE(std::isfinite(t[0])) << "quick " << quick;
  }
}

TEST(DistTimerMeasuredCase, OnlyRankZeroMeasuresWhileTheOthersWait) {
  const Options o = options(3);
  auto store = std::make_shared<HashStore>();
  std::atomic<int> measuring{0};
  std::atomic<bool> overlapped{false};
  std::vector<int> measurements(2, 0);
  auto run_rank = [&](int rank) {
    std::ostringstream out, diag;
    Context ctx(o, out, diag);
    DistTimer timer(store, rank, 2, o, diag);
    const std::vector<DistCase> both{
        {"dc.test.timed",
         [&](int64_t) {
           if (measuring.load() != 0) overlapped = true;
         }},
        {"ref.test.measured", nullptr, [&, rank] {
           ++measurements[static_cast<size_t>(rank)];
           measuring = 1;
           std::this_thread::sleep_for(std::chrono::milliseconds(20));
           measuring = 0;
           return 1e-6;
         }}};
    timer.time(ctx, both);
  };
  std::thread one(run_rank, 1);
  run_rank(0);
  one.join();
  EXPECT_EQ(measurements[0], 3);
  EXPECT_EQ(measurements[1], 0);
  EXPECT_FALSE(overlapped) << "a rank timed its case while rank 0 measured";
}

}  // namespace
}  // namespace thd::bench::dc
