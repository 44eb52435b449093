// The events of one session on a node: each is a sequence of records, issued by
// the command loop in command order and completed by the streams that reach them
// (docs/streams.md, "Events").
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "streams/vector_clock.h"
#include "worker/handle_table.h"

namespace thd::worker {

class EventState {
 public:
  using Clock = std::chrono::steady_clock;
  // What a completed record says: when it ran, and the first failure on its stream
  // before it (null: none).
  struct Record {
    uint64_t generation = 0;  // 0: never recorded
    int64_t time_ns = 0;
    std::shared_ptr<const Poison> poison;
    std::shared_ptr<const streams::VectorClock> clock;  // hazard checker: what the record covers
    uint32_t stream = 0;                                // the stream that ran it
  };
  using Callback = std::function<void(const Record&)>;

  // The next record (command loop): its generation, from 1.
  uint64_t issue();
  // The latest record issued (0: never recorded): what a wait or query refers to.
  uint64_t issued() const;
  // A stream reached record `generation`. Records may complete out of issue order
  // (on different streams): the latest completed generation stands. Waiters wake
  // now; the callbacks now due are returned for the caller to run once it has
  // counted the record as done (so a query they answer sees the stream past it).
  // `time_ns`: when it ran on the worker's steady clock (a GPU record: when its GPU
  // work finished); 0: now.
  [[nodiscard]] std::vector<std::function<void()>> complete(uint64_t generation, uint32_t stream,
                                                            std::shared_ptr<const Poison> poison,
                                                            std::shared_ptr<const streams::VectorClock> clock = nullptr,
                                                            int64_t time_ns = 0);
  // Waits until record `generation` (or a later one) completed; false at `deadline`
  // or when `stop` turns true (checked every few milliseconds).
  bool wait(uint64_t generation, Clock::time_point deadline, const std::function<bool()>& stop) const;
  // The latest completed record.
  Record latest() const;
  // Runs `fn` once record `generation` completed: at once (on this thread) when it
  // has, else on the thread that completes it.
  void when_complete(uint64_t generation, Callback fn);
  // As when_complete, but inside complete() itself, before its caller counts the
  // record's task as done: for what needs only that the record ran, not that its
  // stream is past it (a same-host doorbell, notice_board.h). `fn` must be quick
  // and must not throw.
  void at_record(uint64_t generation, Callback fn);

 private:
  // Runs `fn` now when record `generation` completed, else keeps it in `into`.
  void call_or_keep(std::vector<std::pair<uint64_t, Callback>>& into, uint64_t generation, Callback fn);

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  uint64_t issued_ = 0;
  Record latest_;
  std::vector<std::pair<uint64_t, Callback>> callbacks_;
  std::vector<std::pair<uint64_t, Callback>> at_record_;
};

class EventTable {
 public:
  // The event, made on first use (an event the master created is known to a node
  // once recorded, waited on or queried there).
  std::shared_ptr<EventState> get(uint64_t id);
  // Forgets the events: streams that wait on them keep their state alive.
  void erase(uint64_t id);
  size_t size() const;
  void clear();

 private:
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<EventState>> events_;
};

}  // namespace thd::worker
