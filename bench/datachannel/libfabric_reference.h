// The libfabric reference of the libfabric backend's point-to-point figures:
// libfabric's own fi_pingpong (libfabric-bin; Debian has no fabtests), a server and
// a client on this host, RDM endpoints with tagged messages, the tcp provider
// unless FI_PROVIDER names another.
#pragma once

#include <chrono>
#include <cstdint>

namespace thd::bench::dc {

bool fi_pingpong_built();

struct FiPingpongResult {
  double rtt_us = 0;         // twice its usec/xfer (a ping-pong moves one message each way)
  double bandwidth_gbs = 0;  // its MB/sec, 1e6 bytes: ping-pong bandwidth, a lower bound of streaming
};

FiPingpongResult run_fi_pingpong(int64_t bytes, int64_t iterations,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace thd::bench::dc
