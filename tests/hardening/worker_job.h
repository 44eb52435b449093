// A master-worker job over tcp for the fault tests: this test process is the master
// (rank 0, hosting the store) and each worker is this binary run as
// --hardening-worker (roles.h), a process of its own that a test can stop, kill
// and watch. Every worker is killed and reaped by stop() or the destructor.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <thd/distributed.h>

#include "pool_process.h"

namespace thd::test {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct JobOptions {
  int workers = 2;
  // The master's timeout: rendezvous and every wait for a worker.
  milliseconds timeout{10000};
  // The workers' timeout, which bounds their waits for each other (a copy, a
  // collective); 0: the master's.
  milliseconds worker_timeout{0};
  // THD_TEST_HOOKS=1 for the workers: test latches (detail::test_latch_wait).
  bool test_hooks = false;
  // Flow control and batching of the master; the job sets the rest.
  MasterWorkerOptions master = {};
};

struct JobEnd {
  std::exception_ptr shutdown_error;  // what thd::shutdown() threw
  milliseconds shutdown_took{0};
  // Per worker: its exit code, 128 + signal if it was killed, -1 if it was still
  // running after the grace period (then killed).
  std::vector<int> exit_codes;
};

class WorkerJob {
 public:
  // How long workers get to exit by themselves once the master shut down.
  static constexpr milliseconds kExitGrace{5000};

  // Starts the workers and joins as master: init_master_worker has returned.
  explicit WorkerJob(JobOptions options = {});
  ~WorkerJob();
  WorkerJob(const WorkerJob&) = delete;
  WorkerJob& operator=(const WorkerJob&) = delete;

  int workers() const { return static_cast<int>(procs_.size()); }
  pid_t pid(int node) const;
  // Sends `sig` to node's worker (SIGSTOP, SIGCONT, ...).
  void signal(int node, int sig) const;
  // SIGKILLs node's worker; returns the moment of the kill (detection times are
  // measured from it). The worker is reaped at once.
  Clock::time_point kill(int node);
  // What node's worker printed so far.
  std::string output(int node) const;

  // thd::shutdown(), then waits kExitGrace for the workers to exit. Every worker is
  // continued first, so a stopped one cannot hold the job. Idempotent.
  const JobEnd& stop();

 private:
  void start(uint16_t port);

  JobOptions options_;
  std::vector<std::unique_ptr<TestProcess>> procs_;
  bool stopped_ = false;
  JobEnd end_;
};

// The path of this test binary (the programs of roles.h).
std::string self_path();

}  // namespace thd::test
