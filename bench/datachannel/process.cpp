#include "bench/datachannel/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>

extern char** environ;

namespace thd::bench::dc {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

// NUL-terminated pointer arrays into `strings`, for posix_spawn.
std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// posix_spawn's attribute and file-action objects, destroyed on every path.
struct SpawnAttr {
  posix_spawnattr_t attr;
  SpawnAttr() { posix_spawnattr_init(&attr); }
  ~SpawnAttr() { posix_spawnattr_destroy(&attr); }
};
struct SpawnActions {
  posix_spawn_file_actions_t actions;
  SpawnActions() { posix_spawn_file_actions_init(&actions); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions); }
};

std::string variable_name(const std::string& entry) { return entry.substr(0, entry.find('=')); }

}  // namespace

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int Fd::release() noexcept {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Pipe Pipe::create() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2: " + errno_text(errno));
  return Pipe{Fd(fds[0]), Fd(fds[1])};
}

bool ExitStatus::ok() const { return WIFEXITED(raw) && WEXITSTATUS(raw) == 0; }

std::string ExitStatus::describe() const {
  if (WIFEXITED(raw)) return "exited with code " + std::to_string(WEXITSTATUS(raw));
  if (WIFSIGNALED(raw)) {
    const int sig = WTERMSIG(raw);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(raw);
}

ChildProcess ChildProcess::spawn(const Spec& spec) {
  SpawnAttr attr;
  SpawnActions actions;
  if (spec.own_process_group) {
    posix_spawnattr_setflags(&attr.attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr.attr, 0);
  }
  if (spec.stdout_fd >= 0) posix_spawn_file_actions_adddup2(&actions.actions, spec.stdout_fd, STDOUT_FILENO);
  std::vector<char*> argv = c_strings(spec.argv);
  std::vector<char*> envp = c_strings(spec.env);
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, spec.program.c_str(), &actions.actions, &attr.attr, argv.data(), envp.data());
  if (err != 0) throw std::runtime_error("cannot start " + spec.program + ": " + errno_text(err));
  return ChildProcess(pid, spec.own_process_group);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_), group_(other.group_), swept_(other.swept_), status_(other.status_) {
  other.pid_ = -1;
}

ChildProcess::~ChildProcess() { kill(); }

std::optional<ExitStatus> ChildProcess::poll() {
  if (pid_ < 0 || status_) return status_;
  int raw = 0;
  const pid_t r = ::waitpid(pid_, &raw, WNOHANG);
  if (r == pid_) status_ = ExitStatus{raw};
  return status_;
}

void ChildProcess::signal(int sig) const {
  // A group leader's pid is its group id; the group outlives the leader, so its
  // other members are reached even after the leader has exited.
  ::kill(group_ ? -pid_ : pid_, sig);
}

void ChildProcess::kill(std::chrono::milliseconds grace) {
  if (pid_ < 0 || swept_) return;
  swept_ = true;
  if (!poll() && grace.count() > 0) {
    signal(SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (!poll() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // A reaped pid may be reused: only its group (which lives on while any member
  // does) may still be signalled, for whatever the leader left behind.
  if (!status_ || group_) signal(SIGKILL);
  if (!status_) {
    int raw = 0;
    while (::waitpid(pid_, &raw, 0) < 0 && errno == EINTR) {
    }
    status_ = ExitStatus{raw};
  }
}

std::vector<std::string> environment_with(const std::vector<std::string>& set, const std::vector<std::string>& unset) {
  std::vector<std::string> dropped = unset;
  for (const auto& entry : set) dropped.push_back(variable_name(entry));
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    bool keep = true;
    for (const auto& name : dropped) keep = keep && variable_name(entry) != name;
    if (keep) env.push_back(entry);
  }
  env.insert(env.end(), set.begin(), set.end());
  return env;
}

std::vector<std::string> LineReader::read(std::chrono::milliseconds timeout) {
  std::vector<std::string> lines;
  if (eof_) return lines;
  pollfd p{fd_.get(), POLLIN, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (ready < 0 && errno != EINTR) throw std::runtime_error("poll: " + errno_text(errno));
  if (ready > 0) {
    char buf[4096];
    const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n < 0 && errno != EINTR && errno != EAGAIN) throw std::runtime_error("read: " + errno_text(errno));
    if (n == 0) eof_ = true;
    if (n > 0) pending_.append(buf, static_cast<size_t>(n));
  }
  for (size_t nl; (nl = pending_.find('\n')) != std::string::npos;) {
    lines.push_back(pending_.substr(0, nl));
    pending_.erase(0, nl + 1);
  }
  if (eof_ && !pending_.empty()) lines.push_back(std::exchange(pending_, {}));
  return lines;
}

std::string self_executable() {
  std::string path(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size());
  if (n <= 0 || static_cast<size_t>(n) >= path.size()) {
    throw std::runtime_error("cannot read /proc/self/exe: " + errno_text(errno));
  }
  path.resize(static_cast<size_t>(n));
  return path;
}

uint16_t free_loopback_port() {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error(std::string("cannot pick a free loopback port: ") + std::strerror(errno));
  }
  return ntohs(addr.sin_port);
}

std::string random_token() {
  std::array<uint8_t, 32> bytes{};
  if (::getrandom(bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : bytes) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

void die_with_parent(pid_t parent) {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) throw std::runtime_error("prctl(PR_SET_PDEATHSIG) failed");
  // It may have died before the prctl took effect.
  if (::getppid() != parent) throw std::runtime_error("the launching process is gone");
}

}  // namespace thd::bench::dc
