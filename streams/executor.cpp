#include "streams/executor.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <exception>

#include "tensor/log.h"

namespace thd::streams {

namespace {

// How much better a High stream's thread is scheduled than the process (nice
// steps). Needs CAP_SYS_NICE; without it the stream runs at normal priority.
constexpr int kHighPriorityBoost = 5;

void apply_priority(Priority priority, const std::string& name) {
  if (priority != Priority::High) return;
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  const int nice_now = ::getpriority(PRIO_PROCESS, tid);
  if (nice_now == -1 && errno != 0) return;
  if (::setpriority(PRIO_PROCESS, tid, std::max(-20, nice_now - kHighPriorityBoost)) != 0) {
    THD_LOG_DEBUG("stream {}: high priority not permitted here; it runs at normal priority", name);
  }
}

}  // namespace

Executor::Executor(std::string name, Priority priority) : name_(std::move(name)), priority_(priority) {
  thread_ = std::thread([this] {
    const std::string short_name = name_.substr(0, 15);
    ::pthread_setname_np(::pthread_self(), short_name.c_str());
    apply_priority(priority_, name_);
    loop();
  });
}

Executor::~Executor() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_one();
  thread_.join();
}

uint64_t Executor::submit(Task task) {
  uint64_t seq;
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
    seq = ++submitted_;
  }
  work_cv_.notify_one();
  return seq;
}

uint64_t Executor::submitted() const {
  std::lock_guard lock(mu_);
  return submitted_;
}

uint64_t Executor::completed() const {
  std::lock_guard lock(mu_);
  return completed_;
}

bool Executor::wait_for(uint64_t seq, Clock::time_point deadline) const {
  std::unique_lock lock(mu_);
  return done_cv_.wait_until(lock, deadline, [&] { return settled_ >= seq; });
}

void Executor::when_completed(uint64_t seq, std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (completed_ < seq) {
      callbacks_.emplace_back(seq, std::move(fn));
      return;
    }
  }
  fn();
}

void Executor::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, and everything queued has run
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    try {
      task();
    } catch (const std::exception& e) {
      THD_LOG_WARN("stream {}: a task threw: {}", name_, e.what());
    } catch (...) {
      THD_LOG_WARN("stream {}: a task threw", name_);
    }
    task = nullptr;  // what it holds goes before the task counts as done
    lock.lock();
    ++completed_;
    std::vector<std::function<void()>> due;
    for (auto it = callbacks_.begin(); it != callbacks_.end();) {
      if (it->first <= completed_) {
        due.push_back(std::move(it->second));
        it = callbacks_.erase(it);
      } else {
        ++it;
      }
    }
    if (!due.empty()) {
      // completed_ moves first: a callback that asks (the event record telling a
      // master the stream is past it) finds the task done.
      const uint64_t now_done = completed_;
      lock.unlock();
      for (auto& fn : due) {
        try {
          fn();
        } catch (const std::exception& e) {
          THD_LOG_WARN("stream {}: a completion callback threw: {}", name_, e.what());
        }
      }
      lock.lock();
      settled_ = now_done;
    } else {
      settled_ = completed_;
    }
    done_cv_.notify_all();
  }
}

}  // namespace thd::streams
