// Keeping a worker pool's processes alive (thdrun --pool, docs/worker_pool.md).
// Unlike a job's ranks, a pool's workers are expected to run until told to stop,
// so the policy differs from supervisor.h:
// - A worker that exits or dies while the pool runs is reported on stderr
//   ("thdrun: pool node 1 (pid 4242) was killed by signal SIGKILL; starting it
//   again") and started again after a short back-off. Five failures in a row, each
//   within two seconds of its start, stop the pool (exit status 1): a worker that
//   cannot start (bad token, unreachable store) would otherwise be retried forever.
// - SIGINT, SIGTERM, SIGHUP and SIGQUIT stop the pool: every worker (and the
//   program, if any) gets SIGTERM, then SIGKILL after the grace period; a second
//   SIGINT sends SIGKILL at once.
// - The program, when given, is started once the pool is ready; the pool stops
//   when it exits, and thdrun exits with its status.
// - Every process is reaped before run() returns: no zombies, no orphans.
// Nothing here knows about the pool's store; pool_host.cpp brings that in.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tools/thdrun/process_watch.h"
#include "tools/thdrun/signals.h"
#include "tools/thdrun/spawn.h"

namespace thd::launch {

struct PoolSupervisorOptions {
  int nodes = 0;
  // SIGTERM -> SIGKILL when stopping the pool.
  std::chrono::milliseconds kill_grace{5000};
  // Prefix the workers' output with "[node K] " and the program's with "[master] ".
  bool tag_output = false;
  // Node K's worker process; called again for every restart.
  std::function<ProcessSpec(int node)> worker;
  // Polled until it returns true: every worker has joined the pool.
  std::function<bool()> ready;
  // Called once, when ready() first returns true.
  std::function<void()> on_ready = {};
  // A master to run against the pool once it is ready; the pool stops when it exits.
  std::optional<ProcessSpec> program = std::nullopt;
};

class PoolSupervisor {
 public:
  PoolSupervisor(SignalEvents& signals, PoolSupervisorOptions options);
  // Destroying it kills (SIGKILL) and reaps every process still running.
  ~PoolSupervisor() = default;
  PoolSupervisor(const PoolSupervisor&) = delete;
  PoolSupervisor& operator=(const PoolSupervisor&) = delete;

  // Starts the workers and supervises until the pool has stopped; returns thdrun's
  // exit status: the program's when there is one (128 + the signal if it was
  // interrupted and exited 0), else 0 for a pool stopped by a signal, 1 for a pool
  // stopped because a node kept failing. Throws ExecError when a worker cannot be
  // started at all (thd-worker missing), after killing those already started.
  int run();

 private:
  using Clock = ProcessWatch::Clock;

  struct Member : WatchedProcess {
    explicit Member(int n) : node(n) {}
    int node;  // -1: the program
    Clock::time_point started{};
    int quick_failures = 0;  // in a row, each soon after its start
    std::optional<Clock::time_point> restart_at;
  };

  void start(Member& m);
  void on_exit(Member& m, int wait_status);
  void on_signal(int sig);
  void begin_stop();
  void kill_remaining(const std::string& why);
  bool any_running() const;
  std::optional<Clock::time_point> next_wake(bool waiting_for_ready) const;
  std::string name(const Member& m) const;
  std::string names_of(const std::vector<const Member*>& members) const;  // "pool node 0, the program"

  PoolSupervisorOptions options_;
  SignalEvents& signals_;
  ProcessWatch watch_;
  std::vector<Member> members_;  // the workers by node, then the program

  bool ready_ = false;
  bool stopping_ = false;
  bool failed_ = false;                   // a node kept failing
  std::optional<int> program_status_;     // its exit status once it ended
  std::optional<int> interrupted_by_;     // the first signal that stopped the pool
};

}  // namespace thd::launch
