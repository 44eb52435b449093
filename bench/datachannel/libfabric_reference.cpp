#include "bench/datachannel/libfabric_reference.h"

#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include "bench/datachannel/client_server_run.h"
#include "bench/datachannel/process.h"

// Set by bench/CMakeLists.txt when it finds fi_pingpong.
#ifndef THD_BENCH_FI_PINGPONG
#define THD_BENCH_FI_PINGPONG ""
#endif

namespace thd::bench::dc {
namespace {

constexpr std::string_view kPingpong = THD_BENCH_FI_PINGPONG;

// "bytes  #sent  #ack  total  time  MB/sec  usec/xfer  Mxfers/sec": the row of numbers.
bool parse_row(const std::string& line, FiPingpongResult* out) {
  std::istringstream in(line);
  std::string bytes, sent, ack, total, time;
  double mb = 0, usec = 0;
  if (!(in >> bytes >> sent >> ack >> total >> time >> mb >> usec)) return false;
  if (bytes.empty() || bytes[0] < '0' || bytes[0] > '9') return false;  // the header
  out->rtt_us = 2 * usec;
  out->bandwidth_gbs = mb / 1e3;
  return true;
}

}  // namespace

bool fi_pingpong_built() { return !kPingpong.empty(); }

FiPingpongResult run_fi_pingpong(int64_t bytes, int64_t iterations, std::chrono::milliseconds timeout) {
  if (!fi_pingpong_built()) throw std::logic_error("fi_pingpong was not found at build time");
  const char* env = std::getenv("FI_PROVIDER");
  const std::string provider = env != nullptr && *env != '\0' ? env : "tcp";
  const std::string port = std::to_string(free_loopback_port());
  const std::vector<std::string> common = {"-p", provider, "-e", "rdm", "-m", "tagged", "-I", std::to_string(iterations),
                                           "-S", std::to_string(bytes)};
  std::vector<std::string> server = common;
  server.insert(server.end(), {"-B", port});
  std::vector<std::string> client = common;
  client.insert(client.end(), {"-P", port, "127.0.0.1"});
  FiPingpongResult result;
  run_client_server({.program = std::string(kPingpong), .server = server, .client = client, .timeout = timeout},
                    [&](const std::string& line) { return parse_row(line, &result); });
  return result;
}

}  // namespace thd::bench::dc
