// A master-worker job on this host for the runtime tests: the test process is the
// master (DataChannel rank 0, which hosts the store) and W workers are this same
// test binary, exec'd with --thd-test-worker, which joins as rank i through env://
// and serves until the master shuts down.
//
// Workers are always killed and reaped: by stop(), by the destructor (SIGKILL after a
// grace period), and by the kernel when the test process dies (PR_SET_PDEATHSIG), so
// a failing or crashing test never leaves processes behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include <thd/distributed.h>

#include "sanitizers.h"

namespace thd::test {

// The argument that makes the test binary a worker (see run_worker_if_asked).
inline constexpr const char* kWorkerFlag = "--thd-test-worker";

// Called first thing in main(): when argv holds kWorkerFlag, joins the job the
// environment describes as a worker and exits the process (0 after a clean
// session, 2 when init_master_worker threw, 3 if it returned). Otherwise returns.
void run_worker_if_asked(int argc, char** argv);

struct JobEnd {
  // What thd::shutdown() threw, if anything.
  std::exception_ptr shutdown_error;
  // Exit code per worker (128 + signal for a killed one; -1 for one that had to be
  // killed because it did not exit within the grace period).
  std::vector<int> worker_exit_codes;
  // "" when the session shut down without an error and every worker exited 0;
  // otherwise what went wrong, for a test failure message.
  std::string problems() const;
};

class LocalJob {
 public:
  // How long the master and the workers wait at rendezvous and for each other.
  static constexpr std::chrono::milliseconds kTimeout{20000};
  // How long workers get to exit by themselves after thd::shutdown().
  // (Longer under a sanitizer: LeakSanitizer checks a worker's heap as it exits.)
  static constexpr std::chrono::milliseconds kExitGrace{kUnderSanitizer ? 30000 : 5000};

  // Starts `workers` worker processes and joins as master (thd::init_master_worker
  // has returned when this does). Throws what init threw, after killing the workers.
  // `options` tune the master (flow control, batching); the job sets init_method,
  // world_size, rank, token and timeout.
  explicit LocalJob(int workers, MasterWorkerOptions options = {});
  // Calls stop() when it was not called: shutdown, then kill and reap.
  ~LocalJob();
  LocalJob(const LocalJob&) = delete;
  LocalJob& operator=(const LocalJob&) = delete;

  int workers() const { return workers_; }
  // The pid of the process serving node `node`.
  pid_t worker_pid(int node) const { return pids_.at(static_cast<size_t>(node)); }
  // SIGKILLs node `node`'s worker and reaps it.
  void kill_worker(int node);

  // thd::shutdown(), then waits up to kExitGrace for the workers to exit and kills
  // the rest. Idempotent: later calls return the first result.
  const JobEnd& stop();

 private:
  void start(uint16_t port);
  void kill_and_reap_all();

  int workers_;
  MasterWorkerOptions options_;
  std::vector<pid_t> pids_;
  std::vector<int> exit_codes_;  // -2 while running
  bool stopped_ = false;
  JobEnd end_;
};

// VmRSS in bytes of this process, or of process `pid` (from /proc/<pid>/status).
size_t resident_bytes(pid_t pid = 0);

}  // namespace thd::test
