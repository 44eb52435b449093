// Runs the collectives of one (group, tag) one at a time in issue order, as a
// CUDA stream runs kernels: async calls queue behind each other and run, one at a
// time, as tasks of the process's collective engine (collective_engine.h); a
// blocking call on an idle queue runs on the caller's thread (no hand-off on the
// latency path). A queue has no thread of its own.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

namespace thd::detail {

class CollectiveQueue {
 public:
  using Task = std::function<void()>;  // must not throw: it reports through its request

  CollectiveQueue() = default;
  // Waits until what is queued has run.
  ~CollectiveQueue();
  CollectiveQueue(const CollectiveQueue&) = delete;
  CollectiveQueue& operator=(const CollectiveQueue&) = delete;

  // Queues the task behind the ones issued before it.
  void submit(Task task);
  // Runs the task on this thread when nothing is queued or running, and returns
  // true; returns false (task untouched) otherwise.
  bool try_run_inline(const Task& task);

 private:
  // The running task has finished: hands the engine the next one, if any.
  void finished_one();
  void start_on_engine(const Task& task);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  bool busy_ = false;
  int lane_ = -1;  // the engine's lane, picked at the first async call
};

}  // namespace thd::detail
