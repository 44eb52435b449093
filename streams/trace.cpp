#include "streams/trace.h"

#include <chrono>
#include <cstdlib>

#include "tensor/check.h"

namespace thd::trace {
namespace {

void check_ids(const char* op, int32_t pid, int32_t tid) {
  THD_CHECK(pid >= 0 && tid >= 0, ValueError, op, "pid {} and tid {} must be >= 0", pid, tid);
}

// end - begin, or 0 when end precedes begin; saturates instead of overflowing.
int64_t duration_between(int64_t begin_ns, int64_t end_ns) {
  if (end_ns <= begin_ns) return 0;
  int64_t d = 0;
  if (__builtin_sub_overflow(end_ns, begin_ns, &d)) return INT64_MAX;
  return d;
}

}  // namespace

std::optional<std::string> trace_path_from_env() {
  const char* v = std::getenv("THD_TRACE");
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Recorder::Recorder(bool enabled, size_t max_events) : enabled_(enabled), max_events_(max_events) {}

Recorder::Recorder(Recorder&& other) noexcept {
  std::lock_guard lock(other.mu_);
  enabled_ = other.enabled_;
  max_events_ = other.max_events_;
  data_ = std::move(other.data_);
  other.data_ = TraceData{};
}

Recorder& Recorder::operator=(Recorder&& other) noexcept {
  if (this == &other) return *this;
  std::scoped_lock lock(mu_, other.mu_);
  enabled_ = other.enabled_;
  max_events_ = other.max_events_;
  data_ = std::move(other.data_);
  other.data_ = TraceData{};
  return *this;
}

bool Recorder::admit_locked() {
  if (data_.slices.size() + data_.flows.size() < max_events_) return true;
  ++data_.dropped;
  return false;
}

void Recorder::name_process(int32_t pid, std::string name, int32_t sort_index) {
  if (!enabled_) return;
  check_ids("trace.name_process", pid, 0);
  std::lock_guard lock(mu_);
  auto it = data_.processes.find(pid);
  if (it != data_.processes.end()) {
    it->second = DisplayName{std::move(name), sort_index};
  } else if (data_.processes.size() < max_events_) {
    data_.processes.emplace(pid, DisplayName{std::move(name), sort_index});
  } else {
    ++data_.dropped;
  }
}

void Recorder::name_track(int32_t pid, int32_t tid, std::string name, int32_t sort_index) {
  if (!enabled_) return;
  check_ids("trace.name_track", pid, tid);
  std::lock_guard lock(mu_);
  const auto key = std::make_pair(pid, tid);
  auto it = data_.tracks.find(key);
  if (it != data_.tracks.end()) {
    it->second = DisplayName{std::move(name), sort_index};
  } else if (data_.tracks.size() < max_events_) {
    data_.tracks.emplace(key, DisplayName{std::move(name), sort_index});
  } else {
    ++data_.dropped;
  }
}

void Recorder::slice(int32_t pid, int32_t tid, std::string name, int64_t begin_ns, int64_t end_ns,
                     Args args) {
  if (!enabled_) return;
  check_ids("trace.slice", pid, tid);
  Slice s{pid, tid, std::move(name), begin_ns, duration_between(begin_ns, end_ns), std::move(args)};
  std::lock_guard lock(mu_);
  if (admit_locked()) data_.slices.push_back(std::move(s));
}

void Recorder::flow(uint64_t flow_id, int32_t pid, int32_t tid, int64_t ts_ns, FlowPhase phase) {
  if (!enabled_) return;
  check_ids("trace.flow", pid, tid);
  std::lock_guard lock(mu_);
  if (admit_locked()) data_.flows.push_back(Flow{flow_id, pid, tid, ts_ns, phase});
}

size_t Recorder::event_count() const {
  std::lock_guard lock(mu_);
  return data_.slices.size() + data_.flows.size();
}

uint64_t Recorder::dropped() const {
  std::lock_guard lock(mu_);
  return data_.dropped;
}

TraceData Recorder::snapshot() const {
  std::lock_guard lock(mu_);
  return data_;
}

}  // namespace thd::trace
