#include "datachannel/collective_queue.h"

#include "datachannel/collective_engine.h"

namespace thd::detail {

CollectiveQueue::~CollectiveQueue() {
  // Every queued collective runs: each one fails fast on its own once the channel
  // is closed, and its waiters must hear about it.
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !busy_ && tasks_.empty(); });
}

void CollectiveQueue::submit(Task task) {
  // The engine's settings are checked here, where a bad one reaches the caller.
  (void)CollectiveEngine::instance();
  std::unique_lock lock(mu_);
  if (busy_) {
    tasks_.push_back(std::move(task));
    return;
  }
  busy_ = true;
  lock.unlock();
  try {
    start_on_engine(std::move(task));
  } catch (...) {
    finished_one();
    throw;
  }
}

bool CollectiveQueue::try_run_inline(const Task& task) {
  {
    std::lock_guard lock(mu_);
    if (busy_ || !tasks_.empty()) return false;
    busy_ = true;
  }
  task();
  finished_one();
  return true;
}

void CollectiveQueue::start_on_engine(const Task& task) {
  CollectiveEngine& engine = CollectiveEngine::instance();
  if (lane_ < 0) lane_ = engine.pick_lane();  // only the busy_ holder gets here
  engine.start(lane_, task, [this] { finished_one(); });
}

void CollectiveQueue::finished_one() {
  std::unique_lock lock(mu_);
  if (tasks_.empty()) {
    busy_ = false;
    // Notified under the lock: the destructor may go on the moment it is released.
    cv_.notify_all();
    return;
  }
  Task next = std::move(tasks_.front());
  tasks_.pop_front();
  lock.unlock();
  try {
    start_on_engine(next);
  } catch (...) {
    // No lane could take it (no thread to be had): it runs here, in its turn, rather
    // than never.
    next();
    finished_one();
  }
}

}  // namespace thd::detail
