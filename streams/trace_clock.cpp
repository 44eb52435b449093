#include "streams/trace_clock.h"

#include "tensor/check.h"

namespace thd::trace {

ClockOffset estimate_offset(std::span<const ClockSample> samples) {
  constexpr const char* kOp = "trace.estimate_offset";
  THD_CHECK(!samples.empty(), ValueError, kOp, "no clock samples to estimate an offset from");
  const ClockSample* best = nullptr;
  int64_t best_rtt = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const ClockSample& s = samples[i];
    int64_t rtt = 0;
    const bool overflow = __builtin_sub_overflow(s.master_recv_ns, s.master_send_ns, &rtt);
    THD_CHECK(!overflow && rtt >= 0, ValueError, kOp,
              "clock sample {}: received at {} ns, before it was sent at {} ns", i, s.master_recv_ns,
              s.master_send_ns);
    if (best == nullptr || rtt < best_rtt) {
      best = &s;
      best_rtt = rtt;
    }
  }
  // send + rtt/2 rather than (send + recv)/2: no overflow for any valid sample.
  const int64_t midpoint = best->master_send_ns + best_rtt / 2;
  int64_t offset = 0;
  THD_CHECK(!__builtin_sub_overflow(midpoint, best->worker_ns, &offset), ValueError, kOp,
            "clock offset between master {} ns and worker {} ns overflows", midpoint, best->worker_ns);
  return ClockOffset{offset, best_rtt};
}

}  // namespace thd::trace
