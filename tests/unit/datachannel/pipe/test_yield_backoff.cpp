// The interval between a spinning waiter's yields on an oversubscribed host: longer
// while yields give nothing away, every round again once one ran another thread.
#include <gtest/gtest.h>

#include <chrono>

#include "datachannel/pipe/yield_backoff.h"

namespace thd::detail::pipe {
namespace {

using namespace std::chrono_literals;

TEST(YieldBackoff, YieldsThatComeBackAtOnceDoubleTheIntervalUpToItsCap) {
  YieldBackoff b{1us};
  EXPECT_EQ(b.every(), 1u);
  b.record(400ns);
  EXPECT_EQ(b.every(), 2u);
  b.record(900ns);
  EXPECT_EQ(b.every(), 4u);
  for (int i = 0; i < 20; ++i) b.record(100ns);
  EXPECT_EQ(b.every(), YieldBackoff::kMaxEvery);
}

TEST(YieldBackoff, AYieldThatRanAnotherThreadYieldsEveryRoundAgain) {
  YieldBackoff b{1us};
  for (int i = 0; i < 20; ++i) b.record(100ns);
  b.record(b.gave_away());
  EXPECT_EQ(b.every(), 1u);
  b.record(3us);
  EXPECT_EQ(b.every(), 1u);
  b.record(100ns);
  EXPECT_EQ(b.every(), 2u);
}

TEST(YieldBackoff, TheThresholdIsTheOneGiven) {
  // A host where a yield that switches costs 5 us: 3 us yields gave nothing away.
  YieldBackoff slow{5us};
  slow.record(3us);
  EXPECT_EQ(slow.every(), 2u);
  slow.record(6us);
  EXPECT_EQ(slow.every(), 1u);
}

TEST(YieldBackoff, TheThresholdIsTwiceTheFastestYieldWithinItsBounds) {
  EXPECT_EQ(yield_switch_threshold(400ns), 800ns);
  EXPECT_EQ(yield_switch_threshold(3us), 6us);
  EXPECT_EQ(yield_switch_threshold(20ns), 250ns);  // a clock too coarse to time a yield
  EXPECT_EQ(yield_switch_threshold(50us), 20us);   // every yield switched: a loaded start-up
}

}  // namespace
}  // namespace thd::detail::pipe
