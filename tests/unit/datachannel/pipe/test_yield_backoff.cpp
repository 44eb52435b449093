// The interval between a spinning waiter's yields on an oversubscribed host: longer
// while yields give nothing away, every round again once one ran another thread.
#include <gtest/gtest.h>

#include <chrono>

#include "datachannel/pipe/yield_backoff.h"

namespace thd::detail::pipe {
namespace {

using namespace std::chrono_literals;

TEST(YieldBackoff, YieldsThatComeBackAtOnceDoubleTheIntervalUpToItsCap) {
  YieldBackoff b;
  EXPECT_EQ(b.every(), 1u);
  b.record(400ns);
  EXPECT_EQ(b.every(), 2u);
  b.record(900ns);
  EXPECT_EQ(b.every(), 4u);
  for (int i = 0; i < 20; ++i) b.record(100ns);
  EXPECT_EQ(b.every(), YieldBackoff::kMaxEvery);
}

TEST(YieldBackoff, AYieldThatRanAnotherThreadYieldsEveryRoundAgain) {
  YieldBackoff b;
  for (int i = 0; i < 20; ++i) b.record(100ns);
  b.record(YieldBackoff::kGaveAway);
  EXPECT_EQ(b.every(), 1u);
  b.record(3us);
  EXPECT_EQ(b.every(), 1u);
  b.record(100ns);
  EXPECT_EQ(b.every(), 2u);
}

}  // namespace
}  // namespace thd::detail::pipe
