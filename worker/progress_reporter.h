// Tells the master, while this node has work, that it is alive and how far it got
// (protocol Progress): the master's flow control then waits on a node that is slow
// but finishing ops, and fails only one that stopped finishing them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace thd::worker {

class ProgressReporter {
 public:
  struct Sample {
    uint64_t finished = 0;  // ops finished this session
    uint32_t running = 0;   // ops running now
    bool queued = false;    // ops waiting on a stream
  };
  using SampleFn = std::function<Sample()>;
  using SendFn = std::function<void(const Sample&)>;

  // Reports every `interval` while the node has work; nothing while it is idle.
  ProgressReporter(std::chrono::milliseconds interval, SampleFn sample, SendFn send);
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // A fraction of the session's timeout, so several reports land within it.
  static std::chrono::milliseconds interval_for(std::chrono::milliseconds timeout);

 private:
  void run();

  const std::chrono::milliseconds interval_;
  SampleFn sample_;
  SendFn send_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace thd::worker
