#include "datachannel/collective_queue.h"

#include "datachannel/net/thread_name.h"

namespace thd::detail {

CollectiveQueue::~CollectiveQueue() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void CollectiveQueue::submit(Task task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
    // The thread starts with the first async call: groups that only ever run
    // blocking collectives never have one.
    if (!worker_.joinable()) worker_ = std::thread([this] {
      net::name_this_thread("thd-collectives");
      serve();
    });
  }
  cv_.notify_all();
}

bool CollectiveQueue::try_run_inline(const Task& task) {
  {
    std::lock_guard lock(mu_);
    if (busy_ || !tasks_.empty()) return false;
    busy_ = true;
  }
  task();
  {
    std::lock_guard lock(mu_);
    busy_ = false;
  }
  cv_.notify_all();
  return true;
}

void CollectiveQueue::serve() {
  std::unique_lock lock(mu_);
  for (;;) {
    // Every queued collective runs even when stopping: each one fails fast on its
    // own once the channel is closed, and its waiters must hear about it.
    cv_.wait(lock, [&] { return (!busy_ && !tasks_.empty()) || (stopping_ && tasks_.empty()); });
    if (tasks_.empty()) return;
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    busy_ = true;
    lock.unlock();
    task();
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace thd::detail
