// Putting a worker's trace timestamps on the master's clock. At init the master
// sends a few pings: it notes its send time, the worker replies with its now_ns(),
// the master notes the receive time. The sample with the smallest round trip bounds
// the error best (NTP's rule): the worker read its clock somewhere inside
// [send, recv], so its midpoint is off by at most half the round trip.
#pragma once

#include <cstdint>
#include <span>

namespace thd::trace {

struct ClockSample {
  int64_t master_send_ns = 0;  // master's now_ns() when the ping left
  int64_t worker_ns = 0;       // worker's now_ns() when it answered
  int64_t master_recv_ns = 0;  // master's now_ns() when the answer arrived
};

struct ClockOffset {
  // Add to a worker timestamp to get master time: (send + recv) / 2 - worker.
  int64_t offset_ns = 0;
  // The chosen sample's round trip; |error of offset_ns| <= round_trip_ns / 2.
  int64_t round_trip_ns = 0;
};

// The offset from the sample with the smallest round trip (the first such on ties).
// Throws ValueError when there are no samples or one has recv < send.
ClockOffset estimate_offset(std::span<const ClockSample> samples);

}  // namespace thd::trace
