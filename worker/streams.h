// The streams of one session on a node (docs/streams.md): the default stream,
// whose ops the command loop runs itself, and the streams the master created, each
// an in-order executor with its own ExecContext.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "streams/executor.h"
#include "worker/exec_context.h"

namespace thd::worker {

struct StreamEntry {
  StreamEntry(Session& session, uint32_t id, bool high_priority);
  ExecContext ctx;
  streams::Executor executor;  // last: stops (running what is queued) before ctx goes
};

class StreamSet {
 public:
  using Clock = std::chrono::steady_clock;
  explicit StreamSet(Session& session);
  ~StreamSet();

  ExecContext& default_stream() { return default_; }
  // ValueError for id 0 or a live id.
  void create(uint32_t id, bool high_priority);
  // The stream takes no more work; what it holds still runs. ValueError when unknown.
  void destroy(uint32_t id);
  // ValueError naming the stream when it is not a live stream of this node.
  StreamEntry& get(uint32_t id);
  // The stream whose context `ctx` is, live or destroyed since the op running in
  // it was queued (a destroyed stream still runs what it holds): for that op.
  StreamEntry& running(const ExecContext& ctx);
  // True when no stream other than the default one holds work.
  bool idle() const;
  // Waits until every stream other than the default one has run what it holds;
  // false at `deadline`.
  bool drain(Clock::time_point deadline) const;
  // Calls fn once every stream has run the work it holds now: at once when idle,
  // else on the executor that finishes last.
  void after_current_work(std::function<void()> fn);
  // Every stream's context, the default one first, destroyed ones still running
  // last (for reseeding, clearing errors, the GPU work they queued).
  void for_each_context(const std::function<void(ExecContext&)>& fn);
  size_t live() const;
  // Queued work of every stream (for statistics).
  std::vector<std::pair<uint32_t, size_t>> queued() const;
  // Ends every stream: what they hold runs first.
  void stop_all();

 private:
  void reap_locked();
  // Records the streams' count (under mu_).
  void count_locked() { count_.store(live_.size() + retired_.size(), std::memory_order_release); }

  Session& session_;
  ExecContext default_;
  mutable std::mutex mu_;
  std::map<uint32_t, std::unique_ptr<StreamEntry>> live_;
  std::vector<std::unique_ptr<StreamEntry>> retired_;  // destroyed, still running their work
  // live_ and retired_ together: idle() answers without the lock while there are none.
  std::atomic<size_t> count_{0};
};

}  // namespace thd::worker
