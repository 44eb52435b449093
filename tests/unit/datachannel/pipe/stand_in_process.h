// A child process that stands in for a peer's process in process-watch tests: it
// only waits to be killed. The destructor kills and reaps it whatever happened.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

#include "datachannel/pipe/process_watch.h"

namespace thd::test {

class StandInProcess {
 public:
  StandInProcess() : pid_(::fork()) {
    if (pid_ == 0) {
      // Only async-signal-safe calls after fork() in a threaded test binary.
      for (;;) ::pause();
    }
    if (pid_ < 0) throw std::runtime_error("fork failed");
  }
  ~StandInProcess() {
    kill();
    reap();
  }
  StandInProcess(const StandInProcess&) = delete;
  StandInProcess& operator=(const StandInProcess&) = delete;

  pid_t pid() const { return pid_; }
  // This process's identity with the child's pid and start time.
  detail::pipe::ProcessIdentity identity() const {
    detail::pipe::ProcessIdentity id = detail::pipe::this_process();
    id.pid = pid_;
    id.start_time = detail::pipe::process_start_time(pid_).value_or(0);
    return id;
  }
  // SIGKILL, leaving a zombie until reap().
  void kill() {
    if (pid_ > 0 && !killed_) ::kill(pid_, SIGKILL);
    killed_ = true;
  }
  void reap() {
    if (pid_ > 0 && !reaped_) ::waitpid(pid_, nullptr, 0);
    reaped_ = true;
  }

 private:
  pid_t pid_;
  bool killed_ = false;
  bool reaped_ = false;
};

}  // namespace thd::test
