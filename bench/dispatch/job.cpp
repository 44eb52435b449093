#include "bench/dispatch/job.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace thd::bench::mw {
namespace {

using Clock = std::chrono::steady_clock;

// A loopback port nothing listens on right now, for the master's rendezvous store
// (the master binds it a moment later; a process taking it in between fails the run).
uint16_t free_loopback_port() {
  dc::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
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

// 256 random bits as hex: the run's shared secret, passed only through environments.
std::string random_token() {
  std::array<uint8_t, 32> bytes{};
  if (::getrandom(bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
  }
  std::string hex;
  for (uint8_t b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

dc::ChildProcess spawn(const std::string& exe, const std::string& suite, std::vector<std::string> args,
                       std::vector<std::string> env) {
  dc::ChildProcess::Spec spec;
  spec.program = exe;
  spec.argv = {exe, suite};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = std::move(env);
  // Only this process prints figures.
  spec.stdout_fd = STDERR_FILENO;
  return dc::ChildProcess::spawn(spec);
}

// Throws when `child` has ended with an error.
void check(const char* name, dc::ChildProcess& child) {
  const auto status = child.poll();
  if (status && !status->ok()) throw std::runtime_error(fmt::format("the {} {}", name, status->describe()));
}

}  // namespace

std::unique_ptr<Job> Job::start(const std::string& suite, const std::vector<std::string>& args,
                                std::chrono::milliseconds timeout) {
  std::unique_ptr<Job> job(new Job());
  job->token_ = random_token();
  job->master_port_ = free_loopback_port();
  auto store = std::make_shared<TCPStore>(TCPStoreOptions{
      .host = "127.0.0.1",
      .port = 0,
      .is_server = true,
      .wait_for_workers = false,
      .timeout = timeout,
      .token = job->token_,
  });
  const uint16_t store_port = store->port();
  job->store_ = std::move(store);

  const std::string exe = dc::self_executable();
  const std::string parent = std::to_string(::getpid());
  // The token travels in the environment only, never in a command line (ps); a
  // token file of our own environment would only compete with it.
  std::vector<std::string> peer_args = args;
  peer_args.insert(peer_args.end(), {kRoleFlag, kPeerRole, kParentPidFlag, parent, kStorePortFlag,
                                     std::to_string(store_port)});
  job->peer_.emplace(spawn(exe, suite, peer_args,
                           dc::environment_with({"THD_AUTH_TOKEN=" + job->token_},
                                                {"THD_AUTH_TOKEN_FILE", "RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                 "MASTER_PORT", "LOCAL_RANK"})));
  job->worker_.emplace(spawn(exe, suite, {kRoleFlag, kWorkerRole, kParentPidFlag, parent},
                             dc::environment_with({"THD_AUTH_TOKEN=" + job->token_, "RANK=1", "WORLD_SIZE=2",
                                                   "MASTER_ADDR=127.0.0.1",
                                                   "MASTER_PORT=" + std::to_string(job->master_port_)},
                                                  {"THD_AUTH_TOKEN_FILE", "LOCAL_RANK"})));
  return job;
}

std::string Job::init_method() const { return fmt::format("tcp://127.0.0.1:{}", master_port_); }

void Job::check_children() {
  check("worker", *worker_);
  check("reference peer", *peer_);
}

void Job::finish(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    check_children();
    if (worker_->poll() && peer_->poll()) return;
    if (Clock::now() >= deadline) {
      throw std::runtime_error(fmt::format("the {} did not exit within {} ms after the run",
                                           worker_->poll() ? "reference peer" : "worker", timeout.count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void die_with_parent(pid_t parent) {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) throw std::runtime_error("prctl(PR_SET_PDEATHSIG) failed");
  // It may have died before the prctl took effect.
  if (::getppid() != parent) throw std::runtime_error("the benchmark process is gone");
}

}  // namespace thd::bench::mw
