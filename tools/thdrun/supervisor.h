// Watching the ranks of a running job: reaping them, forwarding signals to them,
// stopping them all when one fails, and copying their tagged output. The loop
// does not know how the ranks were started (launch.cpp) or what they run.
//
// Policy (docs/thdrun.md), per OnRankFailure:
// - kill-all: the first rank to exit non-zero or by a signal is reported on stderr
//   ("thdrun: rank 1 (pid 4242) exited with status 3"); the others get SIGTERM,
//   then SIGKILL after the grace period. The job's status is that rank's (128 +
//   signal for a signal). Later failures, of ranks stopped by the launcher or
//   not, are not reported.
// - master-decides: rank 0 is the master. A worker (rank > 0) that fails is
//   reported ("...; the master decides what it means"), and nothing is stopped.
//   The master's exit ends the job: a failed master is reported and the rest get
//   SIGTERM at once; after a master that exited 0 they have the grace period to
//   exit by themselves first. The job's status is the master's.
// - auto: master-decides once the master has written "master-worker" into the
//   job mode file (master/job_mode.h), kill-all before that or without it; read
//   at each exit, since the master writes it while the job runs.
// - SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to every running rank's
//   process group; a second SIGINT sends SIGKILL instead. A job that was
//   interrupted and whose ranks all exit 0 ends with 128 + the first signal.
// - Every rank is reaped before wait() returns: no zombies, no orphans.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "tools/thdrun/options.h"
#include "tools/thdrun/process_watch.h"
#include "tools/thdrun/signals.h"

namespace thd::launch {

struct SupervisorOptions {
  // SIGTERM -> SIGKILL when stopping the job after a failure.
  std::chrono::milliseconds kill_grace{5000};
  OnRankFailure on_rank_failure = OnRankFailure::Auto;
  // The job mode file the master writes (auto); empty: none, the job is SPMD.
  std::string job_mode_file;
};

class Supervisor {
 public:
  Supervisor(SignalEvents& signals, SupervisorOptions options);
  // Destroying it kills (SIGKILL) and reaps every rank still running.
  ~Supervisor() = default;
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Takes a started rank (start_watched), with the pipes carrying its output when tagged.
  void add(int rank, WatchedProcess process);

  // Supervises until every rank has been reaped and returns the job's exit status.
  // Waits as long as the job runs (a launcher has no business timing out a job);
  // once it stops the job, SIGKILL follows SIGTERM after the grace period.
  int wait();

 private:
  struct Rank : WatchedProcess {
    int rank = 0;
  };

  using Clock = ProcessWatch::Clock;

  int running() const;
  bool master_decides() const;
  void on_exit(Rank& r, int wait_status);
  void on_master_exit(Rank& r, int wait_status);
  void on_signal(int sig);
  void begin_stop();
  void kill_remaining(const std::string& why);
  std::optional<Clock::time_point> next_deadline() const;
  int exit_status() const;

  SupervisorOptions options_;
  ProcessWatch watch_;
  std::vector<Rank> ranks_;

  std::optional<int> first_failure_;   // kill-all: its exit status; later failures do not count
  std::optional<int> master_status_;   // master-decides: the master's exit status
  std::optional<Clock::time_point> stop_at_;  // master-decides: when the ranks the master left are stopped
  bool stopping_ = false;              // SIGTERM or SIGKILL went to the ranks
  std::optional<int> interrupted_by_;  // the first signal forwarded
};

}  // namespace thd::launch
