#include "tools/thdrun/supervisor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <system_error>

#include "tensor/check.h"

namespace thd::launch {
namespace {

std::string seconds_text(std::chrono::milliseconds ms) {
  return fmt::format("{:g} s", static_cast<double>(ms.count()) / 1000.0);
}

}  // namespace

Supervisor::Supervisor(SignalEvents& signals, SupervisorOptions options)
    : signals_(signals), options_(options) {}

void Supervisor::add(int rank, ChildProcess process, std::vector<TaggedOutput> outputs) {
  ranks_.push_back(Rank{rank, std::move(process), std::move(outputs)});
}

int Supervisor::running() const {
  int n = 0;
  for (const Rank& r : ranks_) n += r.process.running() ? 1 : 0;
  return n;
}

int Supervisor::wait() {
  std::vector<pollfd> fds;
  std::vector<TaggedOutput*> readers;  // readers[i] goes with fds[i + 1]
  for (;;) {
    // Reaping on every turn, not only on SIGCHLD: a rank may have exited before
    // wait() was called, and SIGCHLDs that arrive together count as one.
    reap();
    if (running() == 0) break;
    if (kill_at_ && Clock::now() >= *kill_at_) {
      kill_remaining(fmt::format("still running {} after SIGTERM", seconds_text(options_.kill_grace)));
    }

    fds.assign(1, pollfd{signals_.fd(), POLLIN, 0});
    readers.clear();
    for (Rank& r : ranks_) {
      for (TaggedOutput& out : r.outputs) {
        if (!out.open()) continue;
        fds.push_back(pollfd{out.fd(), POLLIN, 0});
        readers.push_back(&out);
      }
    }
    const int n = ::poll(fds.data(), fds.size(), poll_timeout_ms());
    if (n < 0) {
      THD_CHECK(errno == EINTR, Error, "thdrun", "poll failed while supervising the ranks: {}",
                std::system_category().message(errno));
      continue;
    }
    if (fds[0].revents != 0) {
      while (auto sig = signals_.next()) {
        if (*sig != SIGCHLD) on_signal(*sig);
      }
    }
    for (size_t i = 0; i < readers.size(); ++i) {
      if (fds[i + 1].revents != 0) readers[i]->pump();
    }
  }
  for (Rank& r : ranks_) {
    for (TaggedOutput& out : r.outputs) out.finish();
  }
  return exit_status();
}

void Supervisor::reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;  // 0: none has exited; -1 (ECHILD): no children at all
    for (Rank& r : ranks_) {
      if (r.process.running() && r.process.pid() == pid) {
        on_exit(r, status);
        break;
      }
    }
  }
}

void Supervisor::on_exit(Rank& r, int wait_status) {
  r.process.set_reaped(wait_status);
  const int status = exit_code_of(wait_status);
  if (status == 0 || first_failure_) return;
  first_failure_ = status;
  fmt::print(stderr, "thdrun: rank {} (pid {}) {}\n", r.rank, r.process.pid(), describe_wait_status(wait_status));
  // Also after a forwarded signal: ranks that caught it and go on must not be
  // left running without the one that failed.
  if (running() > 0) begin_stop();
}

void Supervisor::on_signal(int sig) {
  if (sig == SIGINT && sigint_seen_) {
    kill_remaining("a second SIGINT");
    return;
  }
  if (sig == SIGINT) sigint_seen_ = true;
  if (!interrupted_by_) interrupted_by_ = sig;
  fmt::print(stderr, "thdrun: got {}; forwarded it to the ranks{}\n", signal_name(sig),
             sig == SIGINT ? " (a second SIGINT kills them)" : "");
  for (Rank& r : ranks_) r.process.signal_group(sig);
}

void Supervisor::begin_stop() {
  fmt::print(stderr, "thdrun: stopping the other ranks (SIGTERM now, SIGKILL in {})\n",
             seconds_text(options_.kill_grace));
  for (Rank& r : ranks_) r.process.signal_group(SIGTERM);
  kill_at_ = Clock::now() + options_.kill_grace;
}

void Supervisor::kill_remaining(const std::string& why) {
  kill_at_.reset();
  std::vector<int> left;
  for (Rank& r : ranks_) {
    if (r.process.running()) left.push_back(r.rank);
  }
  if (left.empty()) return;
  fmt::print(stderr, "thdrun: killing rank{} {} (SIGKILL): {}\n", left.size() == 1 ? "" : "s",
             fmt::join(left, ", "), why);
  for (Rank& r : ranks_) r.process.signal_group(SIGKILL);
}

int Supervisor::poll_timeout_ms() const {
  if (!kill_at_) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(*kill_at_ - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

int Supervisor::exit_status() const {
  if (first_failure_) return *first_failure_;
  if (interrupted_by_) return 128 + *interrupted_by_;
  return 0;
}

}  // namespace thd::launch
