#include "tools/thdrun/pool_supervisor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <system_error>

#include "tensor/check.h"

namespace thd::launch {
namespace {

using std::chrono::milliseconds;

constexpr const char* kOp = "thdrun";
// A worker that exits sooner than this after its start failed to start.
constexpr milliseconds kQuickExit{2000};
constexpr int kMaxQuickFailures = 5;
// Back-off before a restart: 100 ms, doubling per failure in a row, at most 1.6 s.
constexpr milliseconds kRestartDelay{100};
constexpr int kMaxRestartDoublings = 4;
// How often ready() is polled until it holds.
constexpr milliseconds kReadyPoll{20};

std::string seconds_text(milliseconds ms) { return fmt::format("{:g} s", static_cast<double>(ms.count()) / 1000.0); }

}  // namespace

PoolSupervisor::PoolSupervisor(SignalEvents& signals, PoolSupervisorOptions options)
    : signals_(signals), options_(std::move(options)) {
  THD_CHECK(options_.nodes >= 1 && options_.worker && options_.ready, ValueError, kOp,
            "a pool needs nodes, a worker and a readiness check");
}

std::string PoolSupervisor::name(const Member& m) const {
  return m.node < 0 ? std::string("the program") : fmt::format("pool node {}", m.node);
}

void PoolSupervisor::start(Member& m) {
  ProcessSpec spec = m.node < 0 ? *options_.program : options_.worker(m.node);
  std::vector<TaggedOutput> outputs;
  std::optional<Pipe> out, err;  // the write ends close when this returns
  if (options_.tag_output) {
    const std::string prefix = m.node < 0 ? std::string("[master] ") : fmt::format("[node {}] ", m.node);
    out = make_pipe();
    err = make_pipe();
    spec.stdout_fd = out->write.get();
    spec.stderr_fd = err->write.get();
    outputs.emplace_back(prefix, std::move(out->read), STDOUT_FILENO);
    outputs.emplace_back(prefix, std::move(err->read), STDERR_FILENO);
  }
  m.process = spawn(spec, signals_);
  m.outputs = std::move(outputs);
  m.started = Clock::now();
  m.restart_at.reset();
}

bool PoolSupervisor::any_running() const {
  return std::any_of(members_.begin(), members_.end(), [](const Member& m) { return m.process.running(); });
}

int PoolSupervisor::run() {
  members_.reserve(static_cast<size_t>(options_.nodes) + 1);
  for (int node = 0; node < options_.nodes; ++node) {
    members_.emplace_back(node);
    start(members_.back());
  }

  std::vector<pollfd> fds;
  std::vector<TaggedOutput*> readers;  // readers[i] goes with fds[i + 1]
  for (;;) {
    reap();
    if (stopping_ && !any_running()) break;
    const auto now = Clock::now();
    if (kill_at_ && now >= *kill_at_) {
      kill_remaining(fmt::format("still running {} after SIGTERM", seconds_text(options_.kill_grace)));
    }
    if (!stopping_) {
      for (Member& m : members_) {
        if (m.restart_at && now >= *m.restart_at) start(m);
      }
      if (!ready_ && options_.ready()) {
        ready_ = true;
        if (options_.on_ready) options_.on_ready();
        if (options_.program) {
          members_.emplace_back(-1);
          start(members_.back());
        }
      }
    }

    fds.assign(1, pollfd{signals_.fd(), POLLIN, 0});
    readers.clear();
    for (Member& m : members_) {
      for (TaggedOutput& out : m.outputs) {
        if (!out.open()) continue;
        fds.push_back(pollfd{out.fd(), POLLIN, 0});
        readers.push_back(&out);
      }
    }
    const int n = ::poll(fds.data(), fds.size(), poll_timeout_ms(!ready_ && !stopping_));
    if (n < 0) {
      THD_CHECK(errno == EINTR, Error, kOp, "poll failed while supervising the pool: {}",
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
  for (Member& m : members_) {
    for (TaggedOutput& out : m.outputs) out.finish();
  }

  if (failed_) return 1;
  if (program_status_) {
    if (*program_status_ == 0 && interrupted_by_) return 128 + *interrupted_by_;
    return *program_status_;
  }
  return 0;
}

void PoolSupervisor::reap() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (Member& m : members_) {
      if (m.process.running() && m.process.pid() == pid) {
        on_exit(m, status);
        break;
      }
    }
  }
}

void PoolSupervisor::on_exit(Member& m, int wait_status) {
  m.process.set_reaped(wait_status);
  for (TaggedOutput& out : m.outputs) out.finish();
  if (m.node < 0) {
    program_status_ = exit_code_of(wait_status);
    if (*program_status_ != 0 && !stopping_) {
      fmt::print(stderr, "thdrun: the program (pid {}) {}\n", m.process.pid(), describe_wait_status(wait_status));
    }
    if (!stopping_) begin_stop();
    return;
  }
  if (stopping_) return;  // stopped by us, or on its way out anyway

  const bool quick = Clock::now() - m.started < kQuickExit;
  m.quick_failures = quick ? m.quick_failures + 1 : 0;
  if (m.quick_failures >= kMaxQuickFailures) {
    fmt::print(stderr, "thdrun: {} (pid {}) {}; it failed {} times in a row right after starting, stopping the pool\n",
               name(m), m.process.pid(), describe_wait_status(wait_status), m.quick_failures);
    failed_ = true;
    begin_stop();
    return;
  }
  const milliseconds delay = kRestartDelay * (1 << std::min(m.quick_failures, kMaxRestartDoublings));
  fmt::print(stderr, "thdrun: {} (pid {}) {}; starting it again in {}\n", name(m), m.process.pid(),
             describe_wait_status(wait_status), seconds_text(delay));
  m.restart_at = Clock::now() + delay;
}

void PoolSupervisor::on_signal(int sig) {
  if (sig == SIGINT && sigint_seen_) {
    kill_remaining("a second SIGINT");
    return;
  }
  if (sig == SIGINT) sigint_seen_ = true;
  if (stopping_) return;
  interrupted_by_ = sig;
  fmt::print(stderr, "thdrun: got {}; stopping the pool{}\n", signal_name(sig),
             sig == SIGINT ? " (a second SIGINT kills it)" : "");
  begin_stop();
}

void PoolSupervisor::begin_stop() {
  stopping_ = true;
  for (Member& m : members_) {
    m.restart_at.reset();
    m.process.signal_group(SIGTERM);
  }
  kill_at_ = Clock::now() + options_.kill_grace;
}

void PoolSupervisor::kill_remaining(const std::string& why) {
  kill_at_.reset();
  std::vector<std::string> left;
  for (const Member& m : members_) {
    if (m.process.running()) left.push_back(name(m));
  }
  if (left.empty()) return;
  fmt::print(stderr, "thdrun: killing {} (SIGKILL): {}\n", fmt::join(left, ", "), why);
  for (Member& m : members_) m.process.signal_group(SIGKILL);
}

int PoolSupervisor::poll_timeout_ms(bool waiting_for_ready) const {
  std::optional<Clock::time_point> next = kill_at_;
  for (const Member& m : members_) {
    if (m.restart_at && (!next || *m.restart_at < *next)) next = m.restart_at;
  }
  if (waiting_for_ready) {
    const auto poll_at = Clock::now() + kReadyPoll;
    if (!next || poll_at < *next) next = poll_at;
  }
  if (!next) return -1;
  const auto left = std::chrono::ceil<milliseconds>(*next - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

}  // namespace thd::launch
