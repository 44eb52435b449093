#include "worker/progress_reporter.h"

#include <pthread.h>

#include <algorithm>

#include "tensor/log.h"

namespace thd::worker {

using std::chrono::milliseconds;

std::chrono::milliseconds ProgressReporter::interval_for(milliseconds timeout) {
  return std::clamp(timeout / 8, milliseconds(20), milliseconds(1000));
}

ProgressReporter::ProgressReporter(milliseconds interval, SampleFn sample, SendFn send)
    : interval_(interval), sample_(std::move(sample)), send_(std::move(send)), thread_([this] { run(); }) {}

ProgressReporter::~ProgressReporter() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ProgressReporter::run() {
  (void)::pthread_setname_np(::pthread_self(), "thd-progress");
  uint64_t reported = 0;
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
    const Sample s = sample_();
    // An idle node says nothing: the master waits on it only while it has work.
    if (s.running == 0 && !s.queued && s.finished == reported) continue;
    reported = s.finished;
    lock.unlock();
    try {
      send_(s);
    } catch (const std::exception& e) {
      // The master is gone: the command loop ends the session.
      THD_LOG_DEBUG("worker: progress report not sent: {}", e.what());
    }
    lock.lock();
  }
}

}  // namespace thd::worker
