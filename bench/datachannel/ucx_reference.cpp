#include "bench/datachannel/ucx_reference.h"

#include <fmt/format.h>

#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bench/datachannel/process.h"

// Set by bench/CMakeLists.txt when it finds ucx_perftest.
#ifndef THD_BENCH_UCX_PERFTEST
#define THD_BENCH_UCX_PERFTEST ""
#endif

namespace thd::bench::dc {
namespace {

constexpr std::string_view kPerftest = THD_BENCH_UCX_PERFTEST;
using Clock = std::chrono::steady_clock;

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
  const std::string program(kPerftest);
  const uint16_t port = free_loopback_port();
  const std::vector<std::string> env = environment_with({}, {});

  ChildProcess::Spec server_spec;
  server_spec.program = program;
  server_spec.argv = {program, "-p", std::to_string(port)};
  server_spec.env = env;
  server_spec.stdout_fd = STDERR_FILENO;
  ChildProcess server = ChildProcess::spawn(server_spec);

  Pipe out = Pipe::create();
  ChildProcess::Spec client_spec;
  client_spec.program = program;
  client_spec.argv = {program, "127.0.0.1", "-p", std::to_string(port), "-t", run.test,
                      "-s", std::to_string(run.bytes), "-n", std::to_string(run.iterations)};
  client_spec.env = env;
  client_spec.stdout_fd = out.write.get();
  // The server listens once it has started; the client retries its connection.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ChildProcess client = ChildProcess::spawn(client_spec);
  out.write.reset();
  LineReader reader(std::move(out.read));

  UcxPerftestResult result;
  bool found = false;
  std::vector<std::string> printed;
  const auto deadline = Clock::now() + run.timeout;
  while (!reader.at_eof() || !client.poll()) {
    for (const auto& line : reader.read(std::chrono::milliseconds(50))) {
      if (parse_final(line, &result)) {
        found = true;
      } else {
        printed.push_back(line);
      }
    }
    if (Clock::now() >= deadline) {
      client.kill();
      server.kill();
      throw std::runtime_error(fmt::format("ucx_perftest {} timed out after {} s", run.test,
                                           std::chrono::duration_cast<std::chrono::seconds>(run.timeout).count()));
    }
  }
  const ExitStatus status = *client.poll();
  server.kill(std::chrono::seconds(2));
  if (!status.ok() || !found) {
    std::string text;
    for (const auto& line : printed) text += "\n  " + line;
    throw std::runtime_error(fmt::format("ucx_perftest {} {}{}{}", run.test, status.describe(),
                                         found ? "" : " without a Final: line", text.empty() ? "" : "; it printed:" + text));
  }
  return result;
}

}  // namespace thd::bench::dc
