// Starting one process: fork, set it up, exec. Nothing here knows about ranks;
// the launcher (launch.cpp) and, later, the worker pool decide what to start.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include <thd/error.h>

namespace thd::launch {

class SignalEvents;

struct ProcessSpec {
  // argv[0] is looked up in PATH as execvp does (unless it contains a '/').
  std::vector<std::string> argv;
  // The complete environment, NAME=value.
  std::vector<std::string> env;
  // Descriptors to install as the child's 0, 1 and 2; -1 inherits the launcher's.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
};

// The program could not be executed. exit_code() is what a shell would exit with:
// 127 when it was not found, 126 when it was found but could not run.
class ExecError : public Error {
 public:
  ExecError(std::string message, ErrorContext context, std::string program, int error_number)
      : Error(std::move(message), std::move(context)), program_(std::move(program)), errno_(error_number) {}
  const std::string& program() const noexcept { return program_; }
  int error_number() const noexcept { return errno_; }
  int exit_code() const noexcept;

 private:
  std::string program_;
  int errno_;
};

// A started process, the leader of its own process group, that the kernel kills
// (PR_SET_PDEATHSIG, SIGKILL) if the launcher dies. Owning: destroying one that has
// not been reaped kills its group with SIGKILL and reaps it, so no error path
// leaves a process behind.
class ChildProcess {
 public:
  ChildProcess() = default;
  explicit ChildProcess(pid_t pid) noexcept : pid_(pid) {}
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const noexcept { return pid_; }
  // Started and not yet reaped.
  bool running() const noexcept { return pid_ > 0 && !status_; }
  // Sends `sig` to the process's group (it and whatever it started in it); a no-op
  // once reaped, so a recycled pid is never signalled.
  void signal_group(int sig) const noexcept;
  // Records the wait status the supervisor reaped for this pid.
  void set_reaped(int wait_status) noexcept { status_ = wait_status; }
  // The reaped wait status; nullopt while running.
  std::optional<int> wait_status() const noexcept { return status_; }

 private:
  void kill_and_reap() noexcept;

  pid_t pid_ = -1;
  std::optional<int> status_;
};

// Starts `spec` and returns once the program has been exec'd. In the child, before
// exec: a new process group, PR_SET_PDEATHSIG(SIGKILL), the signal mask and
// dispositions thdrun started with (SignalEvents::restore_in_child), the given
// stdio. Every other descriptor thdrun opened is close-on-exec; descriptors thdrun
// inherited are passed on untouched.
// Throws ExecError when the exec fails (the child is reaped first), thd::Error when
// fork fails. Call it from the thread that supervises and outlives the child:
// PR_SET_PDEATHSIG fires when the forking *thread* exits, not the process.
ChildProcess spawn(const ProcessSpec& spec, const SignalEvents& signals);

// A string for a wait status: "exited with status 3", "was killed by signal SIGKILL".
std::string describe_wait_status(int wait_status);
// The shell's number for a wait status: the exit code, or 128 + the signal.
int exit_code_of(int wait_status) noexcept;

}  // namespace thd::launch
