// THD_TRACE on the master (docs/streams.md, "Trace"): the master's own slices, the
// workers' clock offsets measured at start, and at close one Chrome/Perfetto trace
// file of the whole job.
#include <atomic>

#include "datachannel/check.h"
#include "master/session.h"
#include "protocol/framing.h"
#include "streams/trace_clock.h"
#include "streams/trace_json.h"
#include "tensor/log.h"

namespace thd::master {

namespace {

// Round trips per node for the clock offset: the one with the least delay wins.
constexpr int kClockSamples = 8;
// A worker's recording may not be larger than this.
constexpr size_t kMaxTraceBytes = size_t{1} << 30;

// Each master thread that records gets a track of its own, so that slices of one
// track never overlap.
int32_t this_thread_track() {
  static std::atomic<int32_t> next{0};
  thread_local const int32_t track = next.fetch_add(1);
  return track;
}

}  // namespace

void Session::trace_slice(const char* name, int64_t start, trace::Args args) {
  if (!recorder_) return;
  const int32_t track = this_thread_track();
  recorder_->name_track(0, track, track == 0 ? "program" : fmt::format("program thread {}", track), track);
  recorder_->slice(0, track, name, start, trace::now_ns(), std::move(args));
}

void Session::measure_clock_offsets() {
  for (int n = 0; n < num_nodes(); ++n) {
    NodeLink& l = *links_[n];
    std::vector<trace::ClockSample> samples;
    try {
      for (int i = 0; i < kClockSamples; ++i) {
        const int64_t tag = next_fetch_tag();
        protocol::PostedMessage answer(*channel_, l.rank(), tag, options_.timeout);
        const int64_t sent = trace::now_ns();
        l.append_on(0, fb::Op::ClockQuery, [&](auto& b) { return fb::CreateClockQuery(b, tag).Union(); });
        l.flush();
        const fb::Message& m = protocol::verify_message(answer.wait(), "master");
        const int64_t received = trace::now_ns();
        const fb::ClockSample* s = m.body_as_ClockSample();
        if (s == nullptr) {
          THD_THROW_AT(protocol::ProtocolError, "trace", 0, n + 1, "worker node {} answered a clock query with a {}",
                       n, fb::EnumNameBody(m.body_type()));
        }
        samples.push_back({sent, s->worker_ns(), received});
      }
      clock_offsets_[static_cast<size_t>(n)] = trace::estimate_offset(samples).offset_ns;
    } catch (const std::exception& e) {
      // The trace is a diagnostic: without an offset the node's times stay its own.
      THD_LOG_WARN("trace: clock offset of worker node {} not measured: {}", n, e.what());
    }
  }
}

void Session::write_trace() {
  std::vector<trace::Recorder> nodes;
  std::vector<trace::TracePart> parts{{recorder_.get(), 0}};
  nodes.reserve(static_cast<size_t>(num_nodes()));
  for (int n = 0; n < num_nodes(); ++n) {
    NodeLink& l = *links_[n];
    if (l.lost()) continue;
    try {
      const int64_t tag = next_fetch_tag();
      l.append_on(0, fb::Op::TraceDump, [&](auto& b) { return fb::CreateTraceDump(b, tag).Union(); });
      l.flush();
      const Message bytes = protocol::recv_message(*channel_, l.rank(), tag, kMaxTraceBytes,
                                                                options_.timeout);
      nodes.push_back(trace::Recorder::deserialize(bytes));
      parts.push_back({&nodes.back(), clock_offsets_[static_cast<size_t>(n)]});
    } catch (const std::exception& e) {
      THD_LOG_WARN("trace: the recording of worker node {} is missing: {}", n, e.what());
    }
  }
  try {
    trace::write_chrome_trace(*trace_path_, parts);
  } catch (const std::exception& e) {
    THD_LOG_WARN("trace: {}", e.what());
  }
}

}  // namespace thd::master
