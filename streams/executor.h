// One stream of a node, on CPU: an in-order executor. Tasks run one at a time, in
// submission order, on the executor's own thread (docs/streams.md).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace thd::streams {

enum class Priority : int8_t { Normal = 0, High = 1 };

class Executor {
 public:
  using Task = std::function<void()>;
  using Clock = std::chrono::steady_clock;

  // `name` names the thread (at most 15 characters are kept). A High executor's
  // thread asks the kernel for a better scheduling priority; where that is not
  // permitted it runs as Normal (priority is a hint, as in CUDA).
  explicit Executor(std::string name, Priority priority = Priority::Normal);
  // Runs what is queued, then stops.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Appends a task; returns its sequence number (1, 2, ...). A task that throws is
  // logged and counted as completed: tasks report their own errors.
  uint64_t submit(Task task);
  uint64_t submitted() const;
  uint64_t completed() const;
  size_t queued() const { return static_cast<size_t>(submitted() - completed()); }
  // True once every task up to `seq` has run, and the when_completed callbacks due
  // by then have too; false at `deadline`. (A worker frees tensors in such a
  // callback: whoever waited for the stream must find them gone.)
  bool wait_for(uint64_t seq, Clock::time_point deadline) const;
  // Runs `fn` once task `seq` has run: at once on this thread when it has already,
  // else on the executor's thread right after that task.
  void when_completed(uint64_t seq, std::function<void()> fn);

  Priority priority() const { return priority_; }
  const std::string& name() const { return name_; }

 private:
  void loop();

  const std::string name_;
  const Priority priority_;
  mutable std::mutex mu_;
  mutable std::condition_variable done_cv_;  // completed_ moved
  std::condition_variable work_cv_;          // a task, a callback or stop
  std::deque<Task> tasks_;
  std::vector<std::pair<uint64_t, std::function<void()>>> callbacks_;
  uint64_t submitted_ = 0;
  uint64_t completed_ = 0;
  uint64_t settled_ = 0;  // completed, and the callbacks due by then have run
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace thd::streams
