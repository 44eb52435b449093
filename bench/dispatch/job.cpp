#include "bench/dispatch/job.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace thd::bench::mw {
namespace {

using Clock = std::chrono::steady_clock;

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
                                std::chrono::milliseconds timeout, int workers,
                                const std::vector<std::string>& worker_env) {
  std::unique_ptr<Job> job(new Job());
  job->token_ = dc::random_token();
  job->master_port_ = dc::free_loopback_port();
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
  for (int rank = 1; rank <= workers; ++rank) {
    std::vector<std::string> env{"THD_AUTH_TOKEN=" + job->token_, "RANK=" + std::to_string(rank),
                                 "WORLD_SIZE=" + std::to_string(workers + 1), "MASTER_ADDR=127.0.0.1",
                                 "MASTER_PORT=" + std::to_string(job->master_port_)};
    env.insert(env.end(), worker_env.begin(), worker_env.end());
    job->workers_.push_back(spawn(exe, suite, {kRoleFlag, kWorkerRole, kParentPidFlag, parent},
                                  dc::environment_with(env, {"THD_AUTH_TOKEN_FILE", "LOCAL_RANK"})));
  }
  return job;
}

std::string Job::init_method() const { return fmt::format("tcp://127.0.0.1:{}", master_port_); }

void Job::check_children() {
  for (auto& w : workers_) check("worker", w);
  check("reference peer", *peer_);
}

void Job::finish(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    check_children();
    const bool workers_done =
        std::all_of(workers_.begin(), workers_.end(), [](dc::ChildProcess& w) { return w.poll().has_value(); });
    if (workers_done && peer_->poll()) return;
    if (Clock::now() >= deadline) {
      throw std::runtime_error(fmt::format("the {} did not exit within {} ms after the run",
                                           workers_done ? "reference peer" : "worker", timeout.count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}


}  // namespace thd::bench::mw
