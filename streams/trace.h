// The trace recorder behind THD_TRACE=path.json (DESIGN.md §8).
//
// Design
// - Output: one Chrome/Perfetto JSON trace ("Trace Event Format") for the whole job,
//   written by the master at shutdown (streams/trace_json.h). The caller picks the
//   ids: a "process" (pid) per node plus one for the master, a "thread" (tid) per
//   stream; one complete slice ("ph":"X") per op; flow arrows ("ph":"s"/"f") tie an
//   event record to its wait, a copy's send to its receive, a collective's ranks.
// - Recording: every process keeps its own Recorder; calls take one mutex for an
//   append (ops are microseconds or more, so one lock per op is noise). Callers test
//   the inline `enabled()` first, so a job without THD_TRACE pays one load per op.
// - Shipping: a worker's Recorder travels to the master as the compact binary of
//   serialize() (trace_codec.cpp), not as JSON: it is several times smaller, costs no
//   escaping on the worker, and the master writes every part in one pass with its
//   clock offsets applied. deserialize() trusts nothing: every length is checked
//   against the bytes that remain before anything is allocated.
// - Clocks: timestamps are now_ns(), the steady clock. Each worker's offset to the
//   master's steady clock is estimated at init from request/reply samples
//   (streams/trace_clock.h, NTP-style, smallest round trip wins) and added to that
//   worker's timestamps when the file is written.
// - Bound: a Recorder keeps at most max_events slices and flows (default 1M, about
//   the size of a 200 MB JSON file); later ones are dropped and counted, and the
//   writer states the count in the file (an instant event and "metadata"), so a
//   truncated trace never passes for a complete one.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace thd::trace {

// The path THD_TRACE names; nullopt when it is unset or empty (tracing off).
std::optional<std::string> trace_path_from_env();

// The steady clock in nanoseconds: the time base of every timestamp recorded.
int64_t now_ns();

// The value of one slice argument; written to JSON as a string, number, boolean or
// array of integers (shapes, tensor ids).
class ArgValue {
 public:
  using Value = std::variant<std::string, int64_t, uint64_t, double, bool, std::vector<int64_t>>;

  ArgValue(std::string s) : value_(std::move(s)) {}  // NOLINT: implicit by design
  ArgValue(std::string_view s) : value_(std::string(s)) {}  // NOLINT
  ArgValue(const char* s) : value_(std::string(s)) {}  // NOLINT
  template <std::integral T>
  ArgValue(T v) : value_(from_integral(v)) {}  // NOLINT
  template <std::floating_point T>
  ArgValue(T v) : value_(static_cast<double>(v)) {}  // NOLINT
  ArgValue(std::vector<int64_t> list) : value_(std::move(list)) {}  // NOLINT

  const Value& value() const { return value_; }
  bool operator==(const ArgValue&) const = default;

 private:
  template <std::integral T>
  static Value from_integral(T v) {
    if constexpr (std::same_as<T, bool>) {
      return v;
    } else if constexpr (std::signed_integral<T>) {
      return static_cast<int64_t>(v);
    } else {
      return static_cast<uint64_t>(v);
    }
  }

  Value value_;
};

// Key/value pairs shown in the slice's details: {{"name", "add"}, {"bytes", n}}.
using Args = std::vector<std::pair<std::string, ArgValue>>;

enum class FlowPhase : uint8_t { Begin = 0, End = 1 };

struct Slice {
  int32_t pid = 0;
  int32_t tid = 0;
  std::string name;
  int64_t begin_ns = 0;
  int64_t duration_ns = 0;  // >= 0
  Args args;
  bool operator==(const Slice&) const = default;
};

struct Flow {
  uint64_t id = 0;
  int32_t pid = 0;
  int32_t tid = 0;
  int64_t ts_ns = 0;
  FlowPhase phase = FlowPhase::Begin;
  bool operator==(const Flow&) const = default;
};

struct DisplayName {
  std::string name;
  int32_t sort_index = 0;
  bool operator==(const DisplayName&) const = default;
};

// Everything one Recorder holds, in recording order.
struct TraceData {
  std::map<int32_t, DisplayName> processes;                   // by pid
  std::map<std::pair<int32_t, int32_t>, DisplayName> tracks;  // by (pid, tid)
  std::vector<Slice> slices;
  std::vector<Flow> flows;
  uint64_t dropped = 0;  // events (slices, flows, names) refused by the cap
  bool operator==(const TraceData&) const = default;
};

// Collects one process's trace. Thread-safe: any thread may record at any time.
// pids and tids must be >= 0 (Chrome's format reads them as unsigned); a negative
// one is a caller bug and throws ValueError. A disabled Recorder ignores every call.
class Recorder {
 public:
  static constexpr size_t kDefaultMaxEvents = 1'000'000;

  explicit Recorder(bool enabled = true, size_t max_events = kDefaultMaxEvents);
  Recorder(Recorder&& other) noexcept;
  Recorder& operator=(Recorder&& other) noexcept;
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  bool enabled() const noexcept { return enabled_; }
  size_t max_events() const noexcept { return max_events_; }

  // Names a process / a track; a later call for the same id replaces the name.
  // Lower sort_index is shown higher in the viewer.
  void name_process(int32_t pid, std::string name, int32_t sort_index);
  void name_track(int32_t pid, int32_t tid, std::string name, int32_t sort_index);

  // One op on a track, [begin_ns, end_ns] on now_ns()'s clock; end < begin is
  // recorded as a zero-length slice.
  void slice(int32_t pid, int32_t tid, std::string name, int64_t begin_ns, int64_t end_ns,
             Args args = {});

  // One end of a flow arrow. The arrow attaches to the slice of (pid, tid) that
  // encloses ts_ns, so record ts_ns inside that op's slice. The Begin and End of one
  // arrow share flow_id and may be recorded by different processes; ids must be
  // unique within the job's trace.
  void flow(uint64_t flow_id, int32_t pid, int32_t tid, int64_t ts_ns, FlowPhase phase);

  // Slices and flows held (names not counted), and events refused by the cap.
  size_t event_count() const;
  uint64_t dropped() const;

  // A copy of what is held, taken under the lock.
  TraceData snapshot() const;
  // Runs `fn` on what is held, under the lock (no copy): keep it short.
  template <typename F>
  void read(F&& fn) const {
    std::lock_guard lock(mu_);
    fn(static_cast<const TraceData&>(data_));
  }

  // The compact binary form of what is held (streams/trace_codec.cpp).
  std::vector<uint8_t> serialize() const;
  // Rebuilds a Recorder from serialize()'s bytes (enabled, its cap at least what it
  // holds). Throws ValueError on bytes that are truncated, malformed or not a trace.
  static Recorder deserialize(std::span<const uint8_t> bytes);

 private:
  // Callers hold mu_. True when one more event fits; else counts it as dropped.
  bool admit_locked();

  bool enabled_;
  size_t max_events_;
  mutable std::mutex mu_;
  TraceData data_;
};

}  // namespace thd::trace
