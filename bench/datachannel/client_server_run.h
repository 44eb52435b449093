// Runs a vendor's own two-process benchmark (ucx_perftest, fi_pingpong) on this
// host: its server, then its client, reading the client's stdout line by line.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace thd::bench::dc {

struct ClientServerRun {
  std::string program;              // the benchmark's path
  std::vector<std::string> server;  // the server's arguments (after the program)
  std::vector<std::string> client;  // the client's
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

// `take_line` returns true for the line it wanted (its result line). Throws
// std::runtime_error with what the client printed when it fails, prints no such
// line, or runs past the timeout; both processes are killed on every path out.
void run_client_server(const ClientServerRun& run, const std::function<bool(const std::string&)>& take_line);

}  // namespace thd::bench::dc
