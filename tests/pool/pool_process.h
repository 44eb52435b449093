// Processes for the pool tests: thdrun --pool, thd-worker and thd_pool_master
// started with an environment of their own (never setenv on the test process),
// their output in a file the test can watch, and always stopped and reaped.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace thd::test {

// Built next to the tests (see CMakeLists.txt).
std::string worker_path();
std::string pool_master_path();
std::string pool_thdrun_path();

using EnvChanges = std::vector<std::pair<std::string, std::optional<std::string>>>;

// One started program. Its stdout and stderr go to one file. The destructor
// stops it: `stop_signal` first (thdrun then stops its workers), SIGKILL if it is
// still there after a grace period, and reaps it.
class TestProcess {
 public:
  // THD_AUTH_TOKEN and THD_AUTH_TOKEN_FILE are removed from the inherited
  // environment before `env` is applied, so an outer job's token never leaks in.
  TestProcess(std::vector<std::string> argv, const EnvChanges& env, int stop_signal = 9);
  ~TestProcess();
  TestProcess(const TestProcess&) = delete;
  TestProcess& operator=(const TestProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  // Everything it wrote so far.
  std::string output() const;
  // Waits until its output contains `text`; false at the deadline or once it
  // exited without writing it.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds timeout);
  // Its exit code (128 + signal when killed); -1 when it is still running at the
  // deadline (it is then left running).
  int wait(std::chrono::milliseconds timeout);
  void signal(int sig) const;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string output_file_;
  int stop_signal_;
};

// A pool started with `thdrun --pool -n N --listen 127.0.0.1:0`, with the tests'
// token and `env` in its environment, ready (every worker registered) when
// constructed.
class PoolUnderTest {
 public:
  explicit PoolUnderTest(int nodes, std::vector<std::string> extra_args = {}, const EnvChanges& env = {});
  const std::string& url() const { return url_; }
  TestProcess& thdrun() { return *thdrun_; }
  // The pids of thdrun's children (the workers).
  std::vector<pid_t> worker_pids() const;

 private:
  std::optional<TestProcess> thdrun_;
  std::string url_;
};

// The node a thd-worker process serves, from its command line (--node K); -1 if
// it is not one.
int node_of(pid_t pid);
// Its resident memory (VmRSS) in bytes; -1 once it is gone.
int64_t resident_bytes(pid_t pid);

// "key: value" lines a probe printed: the value after the first "<key>: ".
std::optional<std::string> find_after(const std::string& text, const std::string& key);

}  // namespace thd::test
