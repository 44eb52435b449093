// Child processes for the datachannel suite: the ranks it launches and mpirun.
//
// Children are started with posix_spawn (never fork() from a process that may run
// threads) and are killed and reaped when their ChildProcess goes away, so no path
// out of the suite, an exception included, leaves a process behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace thd::bench::dc {

// A file descriptor, closed when this goes away.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept;
  void reset() noexcept;

 private:
  int fd_ = -1;
};

// A close-on-exec pipe; a child gets an end only through ChildProcess::Spec.
struct Pipe {
  Fd read;
  Fd write;
  static Pipe create();
};

// How a child ended, from waitpid's status.
struct ExitStatus {
  int raw = 0;
  bool ok() const;
  // "exited with code 3", "was killed by signal 9 (Killed)".
  std::string describe() const;
};

class ChildProcess {
 public:
  struct Spec {
    std::string program;            // a path, not searched in PATH
    std::vector<std::string> argv;  // argv[0] included
    std::vector<std::string> env;   // "KEY=value", the child's whole environment
    // Made the child's stdout; -1 keeps this process's.
    int stdout_fd = -1;
    // The child leads a new process group, and kill() signals the whole group: for a
    // child that starts children of its own (mpirun).
    bool own_process_group = false;
  };

  // Throws std::runtime_error naming the program when it cannot be started.
  static ChildProcess spawn(const Spec& spec);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // Kills and reaps the child if it is still running.
  ~ChildProcess();

  pid_t pid() const noexcept { return pid_; }
  // How it ended once it has, reaping it; nullopt while it runs. Never blocks.
  std::optional<ExitStatus> poll();
  // SIGTERM first when `grace` > 0 (mpirun forwards it to its ranks and exits), then
  // SIGKILL, to the whole group with own_process_group; reaps it. Only the first
  // call acts.
  void kill(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

 private:
  ChildProcess(pid_t pid, bool group) : pid_(pid), group_(group) {}
  void signal(int sig) const;

  pid_t pid_ = -1;
  bool group_ = false;
  bool swept_ = false;
  std::optional<ExitStatus> status_;
};

// This process's environment with `set` ("KEY=value") replacing or adding entries
// and the variables named in `unset` removed.
std::vector<std::string> environment_with(const std::vector<std::string>& set,
                                          const std::vector<std::string>& unset = {});

// Splits what arrives on a pipe into lines.
class LineReader {
 public:
  explicit LineReader(Fd fd) : fd_(std::move(fd)) {}
  // Waits up to `timeout` for data and returns the complete lines read (without
  // their newline). At end of input the last unterminated piece counts as a line.
  std::vector<std::string> read(std::chrono::milliseconds timeout);
  bool at_eof() const noexcept { return eof_; }

 private:
  Fd fd_;
  std::string pending_;
  bool eof_ = false;
};

// The absolute path of this process's executable (/proc/self/exe).
std::string self_executable();

// A loopback port nothing listens on right now. The caller binds it a moment
// later; another process taking it in between fails the run.
uint16_t free_loopback_port();

// 256 random bits as hex: a run's shared secret, passed only through environments.
std::string random_token();

// A child that calls this dies (SIGKILL) with its launcher, even when the launcher
// is SIGKILLed; throws when the launcher `parent` is already gone.
void die_with_parent(pid_t parent);

}  // namespace thd::bench::dc
