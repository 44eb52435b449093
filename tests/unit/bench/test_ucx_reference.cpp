// The ucx_perftest reference as the figures take it: the median of its runs.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "bench/datachannel/ucx_reference.h"

namespace thd::bench::dc {
namespace {

TEST(UcxPerftestMedian, EachFieldIsTheMedianOfItsRuns) {
  // A run caught in another machine state (0.1 us, 9 GB/s) does not move it.
  const UcxPerftestResult r = median_result({{0.21, 4.0}, {0.10, 9.0}, {0.20, 3.9}, {0.22, 4.1}, {0.60, 1.0}});
  EXPECT_DOUBLE_EQ(r.latency_us, 0.21);
  EXPECT_DOUBLE_EQ(r.bandwidth_gbs, 4.0);
}

TEST(UcxPerftestMedian, AnEvenCountTakesTheMeanOfTheMiddleTwo) {
  const UcxPerftestResult r = median_result({{0.4, 2.0}, {0.2, 6.0}});
  EXPECT_DOUBLE_EQ(r.latency_us, 0.3);
  EXPECT_DOUBLE_EQ(r.bandwidth_gbs, 4.0);
  const UcxPerftestResult one = median_result({{0.5, 3.0}});
  EXPECT_DOUBLE_EQ(one.latency_us, 0.5);
}

TEST(UcxPerftestMedian, NoRunsIsAnError) { EXPECT_THROW(median_result({}), std::invalid_argument); }

}  // namespace
}  // namespace thd::bench::dc
