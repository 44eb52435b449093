#include "worker/streams.h"

#include <atomic>
#include <system_error>

#include <fmt/format.h>

#include "protocol/codec.h"
#include "tensor/check.h"
#include "worker/session.h"

namespace thd::worker {

StreamEntry::StreamEntry(Session& session, uint32_t id, bool high_priority)
    : ctx(session, id),
      executor(fmt::format("thd-stream-{}", id), high_priority ? streams::Priority::High : streams::Priority::Normal) {
  ctx.gpu().set_high_priority(high_priority);
}

StreamSet::StreamSet(Session& session) : session_(session), default_(session, 0) {}

StreamSet::~StreamSet() { stop_all(); }

void StreamSet::create(uint32_t id, bool high_priority) {
  if (id == 0) THD_THROW(ValueError, "Stream::create", "stream id 0 is the default stream of node {}", session_.node());
  std::lock_guard lock(mu_);
  reap_locked();
  if (live_.count(id) != 0) {
    THD_THROW(ValueError, "Stream::create", "stream {} already exists on node {}", id, session_.node());
  }
  // The master keeps its own, lower limit (max_streams_per_node); this one holds
  // against any master.
  if (live_.size() + retired_.size() >= protocol::kMaxStreamsPerNode) {
    THD_THROW(ValueError, "Stream::create",
              "node {} has {} streams ({} destroyed but still running their work): a session may have at most {} "
              "streams on a node",
              session_.node(), live_.size() + retired_.size(), retired_.size(), protocol::kMaxStreamsPerNode);
  }
  std::unique_ptr<StreamEntry> entry;
  try {
    entry = std::make_unique<StreamEntry>(session_, id, high_priority);
  } catch (const std::system_error& e) {
    THD_THROW(ValueError, "Stream::create",
              "node {} could not start the thread of stream {} ({} streams on the node): {}; the process has reached "
              "its thread limit (ulimit -u, the cgroup's pids.max): destroy streams no longer used",
              session_.node(), id, live_.size() + retired_.size(), e.what());
  }
  session_.seed_stream(entry->ctx);
  live_.emplace(id, std::move(entry));
  count_locked();
}

void StreamSet::destroy(uint32_t id) {
  std::lock_guard lock(mu_);
  auto it = live_.find(id);
  if (it == live_.end()) {
    THD_THROW(ValueError, "~Stream", "stream {} is not a stream of node {}", id, session_.node());
  }
  retired_.push_back(std::move(it->second));
  live_.erase(it);
  reap_locked();
}

StreamEntry& StreamSet::get(uint32_t id) {
  std::lock_guard lock(mu_);
  auto it = live_.find(id);
  if (it == live_.end()) {
    THD_THROW(ValueError, "stream", "stream {} is not a stream of node {} (never created, or destroyed)", id,
              session_.node());
  }
  return *it->second;
}

StreamEntry& StreamSet::running(const ExecContext& ctx) {
  std::lock_guard lock(mu_);
  if (auto it = live_.find(ctx.stream()); it != live_.end() && &it->second->ctx == &ctx) return *it->second;
  for (const auto& s : retired_) {
    if (&s->ctx == &ctx) return *s;
  }
  THD_THROW(ValueError, "stream", "stream {} of node {} is not running (the default stream, or finished)",
            ctx.stream(), session_.node());
}

bool StreamSet::idle() const {
  // No streams: nothing to lock for (every op of a program that uses none asks).
  if (count_.load(std::memory_order_acquire) == 0) return true;
  std::lock_guard lock(mu_);
  for (const auto& [id, s] : live_) {
    if (s->executor.queued() != 0) return false;
  }
  for (const auto& s : retired_) {
    if (s->executor.queued() != 0) return false;
  }
  return true;
}

bool StreamSet::drain(Clock::time_point deadline) const {
  std::vector<std::pair<const streams::Executor*, uint64_t>> marks;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : live_) marks.emplace_back(&s->executor, s->executor.submitted());
    for (const auto& s : retired_) marks.emplace_back(&s->executor, s->executor.submitted());
  }
  // The entries cannot go meanwhile: only the command loop (this thread, or the
  // one that called drain) creates, destroys and reaps streams.
  for (const auto& [ex, seq] : marks) {
    if (!ex->wait_for(seq, deadline)) return false;
  }
  return true;
}

void StreamSet::after_current_work(std::function<void()> fn) {
  std::vector<std::pair<streams::Executor*, uint64_t>> busy;
  {
    std::lock_guard lock(mu_);
    auto mark = [&](StreamEntry& s) {
      const uint64_t seq = s.executor.submitted();
      if (s.executor.completed() < seq) busy.emplace_back(&s.executor, seq);
    };
    for (auto& [id, s] : live_) mark(*s);
    for (auto& s : retired_) mark(*s);
  }
  if (busy.empty()) {
    fn();
    return;
  }
  auto remaining = std::make_shared<std::atomic<size_t>>(busy.size());
  auto shared_fn = std::make_shared<std::function<void()>>(std::move(fn));
  for (auto& [ex, seq] : busy) {
    ex->when_completed(seq, [remaining, shared_fn] {
      if (remaining->fetch_sub(1) == 1) (*shared_fn)();
    });
  }
}

void StreamSet::for_each_context(const std::function<void(ExecContext&)>& fn) {
  fn(default_);
  std::lock_guard lock(mu_);
  for (auto& [id, s] : live_) fn(s->ctx);
  for (auto& s : retired_) fn(s->ctx);  // destroyed, still running: their GPU work counts too
}

size_t StreamSet::live() const {
  std::lock_guard lock(mu_);
  return live_.size();
}

std::vector<std::pair<uint32_t, size_t>> StreamSet::queued() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<uint32_t, size_t>> out;
  for (const auto& [id, s] : live_) out.emplace_back(id, s->executor.queued());
  return out;
}

void StreamSet::stop_all() {
  std::map<uint32_t, std::unique_ptr<StreamEntry>> live;
  std::vector<std::unique_ptr<StreamEntry>> retired;
  {
    std::lock_guard lock(mu_);
    live.swap(live_);
    retired.swap(retired_);
    count_locked();
  }
  // Destroyed outside the lock: their last tasks may still look streams up.
  live.clear();
  retired.clear();
}

void StreamSet::reap_locked() {
  std::erase_if(retired_, [](const std::unique_ptr<StreamEntry>& s) { return s->executor.queued() == 0; });
  count_locked();
}

}  // namespace thd::worker
