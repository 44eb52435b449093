// Runs the collectives of one (group, tag) one at a time in issue order, as a
// CUDA stream runs kernels: async calls queue behind each other on a worker
// thread; a blocking call on an idle queue runs on the caller's thread (no
// hand-off on the latency path).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace thd::detail {

class CollectiveQueue {
 public:
  using Task = std::function<void()>;  // must not throw: it reports through its request

  CollectiveQueue() = default;
  // Runs what is queued, then stops the thread.
  ~CollectiveQueue();
  CollectiveQueue(const CollectiveQueue&) = delete;
  CollectiveQueue& operator=(const CollectiveQueue&) = delete;

  // Queues the task behind the ones issued before it.
  void submit(Task task);
  // Runs the task on this thread when nothing is queued or running, and returns
  // true; returns false (task untouched) otherwise.
  bool try_run_inline(const Task& task);

 private:
  void serve();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace thd::detail
