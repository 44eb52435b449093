// The UCX reference of the ucx backend's point-to-point figures: UCX's own
// ucx_perftest (ucx-utils), a server and a client on this host, with the same UCX_*
// environment as the ranks.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace thd::bench::dc {

// Whether this build found ucx_perftest.
bool ucx_perftest_built();

struct UcxPerftestRun {
  std::string test;       // "tag_lat" or "tag_bw"
  int64_t bytes = 8;
  int64_t iterations = 10000;
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

struct UcxPerftestResult {
  double latency_us = 0;  // "average" latency: half a round trip for tag_lat
  double bandwidth_gbs = 0;  // overall bandwidth, 1e9 bytes/s
};

// Runs the server and the client and reads the client's "Final:" line. Throws
// std::runtime_error with what they printed when either fails or times out (both
// are then killed).
UcxPerftestResult run_ucx_perftest(const UcxPerftestRun& run);

// The reference as the figures are taken: the median of `runs` runs, latency and
// bandwidth each (the runs' results are in *each when given). One run alone catches
// whatever state the machine is in for its second or two; this VM changes states
// (round trips of 0.2, 0.4 and 1.2 us) within seconds, and a reference caught in
// another state than the figure's was off by 3-4x either way.
UcxPerftestResult run_ucx_perftest_median(const UcxPerftestRun& run, int runs,
                                          std::vector<UcxPerftestResult>* each = nullptr);

// The median of each field (the mean of the middle two for an even count).
UcxPerftestResult median_result(std::vector<UcxPerftestResult> results);

}  // namespace thd::bench::dc
