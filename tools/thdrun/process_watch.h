// What thdrun's two supervisors share (a job's ranks, supervisor.h; a pool's
// workers and program, pool_supervisor.h): starting a process with its output
// tagged, reaping the processes that exit, waiting for signals and output, and
// stopping processes with SIGTERM and, after a grace period, SIGKILL. What a
// process's exit or a signal means is each supervisor's policy, not this.
#pragma once

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <concepts>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "tools/thdrun/signals.h"
#include "tools/thdrun/spawn.h"
#include "tools/thdrun/tagged_output.h"

namespace thd::launch {

// A supervised process and the pipes that carry its output when it is tagged.
struct WatchedProcess {
  ChildProcess process;
  std::vector<TaggedOutput> outputs;

  // Copies what the pipes still hold and closes them (the process has exited).
  void finish_output();
};

// Starts `spec` (throwing as spawn() does). With a tag, its stdout and stderr go
// through pipes whose lines the returned outputs copy to thdrun's own, each
// prefixed with the tag.
WatchedProcess start_watched(ProcessSpec spec, const SignalEvents& signals, const std::optional<std::string>& tag);

// "1.5 s"
std::string seconds_text(std::chrono::milliseconds ms);

template <typename M>
concept Watched = std::derived_from<M, WatchedProcess>;

// The supervision loop's machinery over a supervisor's processes (`members`: its
// ranks, or its nodes and program). Every member is reaped before a supervisor
// leaves its loop; ChildProcess kills and reaps any that is not.
class ProcessWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // `what` names what is supervised in the error a failed poll raises ("the ranks").
  ProcessWatch(SignalEvents& signals, std::chrono::milliseconds kill_grace, std::string what);

  // Reaps every member that has exited, without waiting, and calls
  // on_exit(member, wait_status) for each once its status is recorded. Meant for
  // every turn of the loop, not only after a SIGCHLD: a process may exit before
  // supervision starts, and SIGCHLDs that arrive together count as one.
  template <Watched M, typename OnExit>
  void reap(std::vector<M>& members, OnExit&& on_exit) {
    while (const std::optional<Exit> exit = reap_one()) {
      for (M& m : members) {
        if (m.process.running() && m.process.pid() == exit->pid) {
          m.process.set_reaped(exit->wait_status);
          on_exit(m, exit->wait_status);
          break;
        }
      }
    }
  }

  // Waits until a signal arrives, a member's output can be copied, or `until`
  // passes (nullopt: no limit). Copies the output, and calls on_signal(sig) for
  // each signal but SIGCHLD (reap() looks after exits).
  template <Watched M, typename OnSignal>
  void wait(std::vector<M>& members, std::optional<Clock::time_point> until, OnSignal&& on_signal) {
    fds_.assign(1, pollfd{signals_.fd(), POLLIN, 0});
    readers_.clear();
    for (M& m : members) watch_output(m);
    if (!poll(until)) return;
    if (fds_[0].revents != 0) {
      while (auto sig = signals_.next()) {
        if (*sig != SIGCHLD) on_signal(*sig);
      }
    }
    pump_ready();
  }

  // SIGTERM to every member's process group now; SIGKILL is due after the grace
  // period (kill_if_overdue).
  template <Watched M>
  void terminate(std::vector<M>& members) {
    for (M& m : members) m.process.signal_group(SIGTERM);
    kill_at_ = Clock::now() + kill_grace_;
  }

  // SIGKILL to every member's process group, saying on stderr why and who
  // (`describe` gets the members still running: "ranks 1, 2"). Nothing when none
  // is running.
  template <Watched M, typename Describe>
  void kill(std::vector<M>& members, const std::string& why, Describe&& describe) {
    kill_at_.reset();
    std::vector<const M*> left;
    for (const M& m : members) {
      if (m.process.running()) left.push_back(&m);
    }
    if (left.empty()) return;
    fmt::print(stderr, "thdrun: killing {} (SIGKILL): {}\n", describe(left), why);
    for (M& m : members) m.process.signal_group(SIGKILL);
  }

  // kill() once the grace period of the last terminate() has passed.
  template <Watched M, typename Describe>
  void kill_if_overdue(std::vector<M>& members, Describe&& describe) {
    if (kill_at_ && Clock::now() >= *kill_at_) {
      kill(members, fmt::format("still running {} after SIGTERM", seconds_text(kill_grace_)), describe);
    }
  }

  // When terminate()'s SIGKILL is due; nullopt when none is.
  std::optional<Clock::time_point> kill_at() const { return kill_at_; }
  std::chrono::milliseconds kill_grace() const { return kill_grace_; }

  // Notes a SIGINT; true for the second one, which kills instead of stopping.
  bool second_sigint(int sig);

  template <Watched M>
  static void finish_output(std::vector<M>& members) {
    for (M& m : members) m.finish_output();
  }

 private:
  struct Exit {
    pid_t pid;
    int wait_status;
  };
  static std::optional<Exit> reap_one();
  void watch_output(WatchedProcess& p);
  // false when a signal interrupted the poll
  bool poll(std::optional<Clock::time_point> until);
  void pump_ready();

  SignalEvents& signals_;
  std::chrono::milliseconds kill_grace_;
  std::string what_;
  std::optional<Clock::time_point> kill_at_;
  bool sigint_seen_ = false;
  std::vector<pollfd> fds_;               // the signal pipe, then readers_
  std::vector<TaggedOutput*> readers_;    // readers_[i] goes with fds_[i + 1]
};

}  // namespace thd::launch
