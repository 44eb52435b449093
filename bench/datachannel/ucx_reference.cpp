#include "bench/datachannel/ucx_reference.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "bench/datachannel/client_server_run.h"
#include "bench/datachannel/process.h"
#include "bench/harness.h"

// Set by bench/CMakeLists.txt when it finds ucx_perftest.
#ifndef THD_BENCH_UCX_PERFTEST
#define THD_BENCH_UCX_PERFTEST ""
#endif

namespace thd::bench::dc {
namespace {

constexpr std::string_view kPerftest = THD_BENCH_UCX_PERFTEST;

// "Final:  iters  p50  avg_lat  overall_lat  avg_bw  overall_bw  avg_rate  overall_rate"
bool parse_final(const std::string& line, UcxPerftestResult* out) {
  std::istringstream in(line);
  std::string word;
  double iters = 0, p50 = 0, lat = 0, lat_all = 0, bw = 0, bw_all = 0;
  if (!(in >> word) || word != "Final:") return false;
  if (!(in >> iters >> p50 >> lat >> lat_all >> bw >> bw_all)) return false;
  out->latency_us = lat;
  out->bandwidth_gbs = bw_all * 1048576.0 / 1e9;  // ucx_perftest's MB are MiB
  return true;
}

}  // namespace

bool ucx_perftest_built() { return !kPerftest.empty(); }

UcxPerftestResult run_ucx_perftest(const UcxPerftestRun& run) {
  if (!ucx_perftest_built()) throw std::logic_error("ucx_perftest was not found at build time");
  const std::string port = std::to_string(free_loopback_port());
  UcxPerftestResult result;
  run_client_server({.program = std::string(kPerftest),
                     .server = {"-p", port},
                     .client = {"127.0.0.1", "-p", port, "-t", run.test, "-s", std::to_string(run.bytes), "-n",
                                std::to_string(run.iterations)},
                     .timeout = run.timeout},
                    [&](const std::string& line) { return parse_final(line, &result); });
  return result;
}

UcxPerftestResult median_result(std::vector<UcxPerftestResult> results) {
  if (results.empty()) throw std::invalid_argument("median_result: no results");
  auto median = [&](double UcxPerftestResult::*field) {
    std::vector<double> v;
    v.reserve(results.size());
    for (const UcxPerftestResult& r : results) v.push_back(r.*field);
    return statistic_of(std::move(v), Statistic::Median);
  };
  return {median(&UcxPerftestResult::latency_us), median(&UcxPerftestResult::bandwidth_gbs)};
}

UcxPerftestResult run_ucx_perftest_median(const UcxPerftestRun& run, int runs,
                                          std::vector<UcxPerftestResult>* each) {
  std::vector<UcxPerftestResult> results;
  for (int i = 0; i < std::max(runs, 1); ++i) results.push_back(run_ucx_perftest(run));
  if (each != nullptr) *each = results;
  return median_result(std::move(results));
}

}  // namespace thd::bench::dc
