#include "tools/thdrun/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <system_error>
#include <thread>
#include <utility>

#include "tools/thdrun/fd.h"
#include "tensor/check.h"
#include "tools/thdrun/signals.h"

namespace thd::launch {
namespace {

constexpr const char* kOp = "thdrun";
// How long a fresh child may take to reach exec. It only runs a few system calls
// first; past this it is taken as started, and an exec failure then shows up as
// its exit status 127 instead.
constexpr int kExecReportTimeoutMs = 30000;
// How long a SIGKILLed child may take to be reaped before it is left to init.
constexpr auto kReapAfterKillTimeout = std::chrono::seconds(5);

// What a child that failed before or at exec writes to the report pipe.
enum class Stage : int { ProcessGroup, DeathSignal, Stdio, Exec };
struct ChildFailure {
  Stage stage;
  int error;
};

const char* stage_name(Stage s) {
  switch (s) {
    case Stage::ProcessGroup:
      return "setpgid";
    case Stage::DeathSignal:
      return "prctl(PR_SET_PDEATHSIG)";
    case Stage::Stdio:
      return "dup2";
    case Stage::Exec:
      return "exec";
  }
  return "?";
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Child side, between fork and exec: async-signal-safe calls only.
[[noreturn]] void report_and_exit(int report_fd, Stage stage, int error) noexcept {
  ChildFailure f{stage, error};
  ssize_t ignored = ::write(report_fd, &f, sizeof f);  // a pipe write this small is atomic
  (void)ignored;
  ::_exit(127);
}

bool install_stdio(int from, int to) noexcept {
  if (from < 0) return true;
  if (from == to) return ::fcntl(to, F_SETFD, 0) == 0;  // keep it across exec
  return ::dup2(from, to) == to;                       // dup2 clears FD_CLOEXEC on `to`
}

[[noreturn]] void run_child(const ProcessSpec& spec, const SignalEvents& signals, pid_t launcher,
                            char* const* argv, char* const* envp, int report_fd) noexcept {
  if (::setpgid(0, 0) != 0) report_and_exit(report_fd, Stage::ProcessGroup, errno);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) report_and_exit(report_fd, Stage::DeathSignal, errno);
  // The launcher may have died before prctl took effect; then no signal will come.
  if (::getppid() != launcher) ::_exit(127);
  signals.restore_in_child();
  if (!install_stdio(spec.stdin_fd, 0) || !install_stdio(spec.stdout_fd, 1) || !install_stdio(spec.stderr_fd, 2)) {
    report_and_exit(report_fd, Stage::Stdio, errno);
  }
  ::execvpe(argv[0], argv, envp);
  report_and_exit(report_fd, Stage::Exec, errno);
}

// Reads the child's report: nullopt once exec closed the pipe (or after the timeout).
std::optional<ChildFailure> read_report(int fd) {
  pollfd p{fd, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, kExecReportTimeoutMs);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) return std::nullopt;
  ChildFailure f{};
  ssize_t n;
  do {
    n = ::read(fd, &f, sizeof f);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof f)) return std::nullopt;
  return f;
}

}  // namespace

int ExecError::exit_code() const noexcept { return errno_ == ENOENT ? 127 : 126; }

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), status_(std::exchange(other.status_, std::nullopt)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    kill_and_reap();
    pid_ = std::exchange(other.pid_, -1);
    status_ = std::exchange(other.status_, std::nullopt);
  }
  return *this;
}

ChildProcess::~ChildProcess() { kill_and_reap(); }

void ChildProcess::signal_group(int sig) const noexcept {
  if (!running()) return;
  // The group: the child and whatever it started. The pid alone if the program has
  // moved itself into another group since (setsid keeps pgid == pid, so it is still
  // reached through the group), without signalling it twice.
  if (::kill(-pid_, sig) != 0 || ::getpgid(pid_) != pid_) ::kill(pid_, sig);
}

void ChildProcess::kill_and_reap() noexcept {
  if (!running()) return;
  signal_group(SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + kReapAfterKillTimeout;
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() >= deadline) break;  // stuck in the kernel; init reaps it
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  status_ = status;
}

ChildProcess spawn(const ProcessSpec& spec, const SignalEvents& signals) {
  THD_CHECK(!spec.argv.empty() && !spec.argv.front().empty(), ValueError, kOp, "spawn: no program given");
  // Everything the child needs is built before fork: after it, the child may only
  // make async-signal-safe calls.
  std::vector<char*> argv = c_strings(spec.argv);
  std::vector<char*> envp = c_strings(spec.env);
  const pid_t launcher = ::getpid();

  int report[2];
  THD_CHECK(::pipe2(report, O_CLOEXEC) == 0, Error, kOp, "cannot create a pipe: {}",
            std::system_category().message(errno));
  UniqueFd report_read(report[0]);
  UniqueFd report_write(report[1]);

  // Forked with every signal blocked, so that none of thdrun's handlers can run in
  // the child before it has put the original dispositions back.
  sigset_t all, before;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  const pid_t pid = ::fork();
  if (pid == 0) run_child(spec, signals, launcher, argv.data(), envp.data(), report_write.get());
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  THD_CHECK(pid >= 0, Error, kOp, "cannot start '{}': fork failed: {}", spec.argv.front(),
            std::system_category().message(fork_errno));

  ChildProcess child(pid);
  report_write.reset();
  // Also from this side, so that signalling the group works even before the child
  // has run; EACCES once the child has exec'd is fine, it made the group itself.
  ::setpgid(pid, pid);

  if (auto failure = read_report(report_read.get())) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    child.set_reaped(status);
    const std::string& program = spec.argv.front();
    if (failure->stage == Stage::Exec) {
      const std::string reason = std::system_category().message(failure->error);
      const bool searched = program.find('/') == std::string::npos;
      throw ExecError(fmt::format("cannot run '{}': {}{}", program, reason,
                                  searched && failure->error == ENOENT ? " (not found in PATH)" : ""),
                      detail::context_here(kOp, __FILE__, __LINE__), program, failure->error);
    }
    THD_THROW(Error, kOp, "cannot start '{}': {} failed in the child: {}", program, stage_name(failure->stage),
              std::system_category().message(failure->error));
  }
  return child;
}

std::string describe_wait_status(int wait_status) {
  if (WIFEXITED(wait_status)) return fmt::format("exited with status {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    return fmt::format("was killed by signal {}{}", signal_name(WTERMSIG(wait_status)),
                       WCOREDUMP(wait_status) ? " (core dumped)" : "");
  }
  return fmt::format("ended with wait status {:#x}", wait_status);
}

int exit_code_of(int wait_status) noexcept {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

}  // namespace thd::launch
