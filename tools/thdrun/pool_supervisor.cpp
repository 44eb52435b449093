#include "tools/thdrun/pool_supervisor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>

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

}  // namespace

PoolSupervisor::PoolSupervisor(SignalEvents& signals, PoolSupervisorOptions options)
    : options_(std::move(options)), signals_(signals), watch_(signals, options_.kill_grace, "the pool") {
  THD_CHECK(options_.nodes >= 1 && options_.worker && options_.ready, ValueError, kOp,
            "a pool needs nodes, a worker and a readiness check");
}

std::string PoolSupervisor::name(const Member& m) const {
  return m.node < 0 ? std::string("the program") : fmt::format("pool node {}", m.node);
}

void PoolSupervisor::start(Member& m) {
  std::optional<std::string> tag;
  if (options_.tag_output) tag = m.node < 0 ? std::string("[master] ") : fmt::format("[node {}] ", m.node);
  // A restart replaces the process and its pipes; the node's history stays.
  static_cast<WatchedProcess&>(m) =
      start_watched(m.node < 0 ? *options_.program : options_.worker(m.node), signals_, tag);
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

  const auto names = [this](const std::vector<const Member*>& left) { return names_of(left); };
  for (;;) {
    watch_.reap(members_, [this](Member& m, int wait_status) { on_exit(m, wait_status); });
    if (stopping_ && !any_running()) break;
    watch_.kill_if_overdue(members_, names);
    if (!stopping_) {
      const auto now = Clock::now();
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
    watch_.wait(members_, next_wake(!ready_ && !stopping_), [this](int sig) { on_signal(sig); });
  }
  ProcessWatch::finish_output(members_);

  if (failed_) return 1;
  if (program_status_) {
    if (*program_status_ == 0 && interrupted_by_) return 128 + *interrupted_by_;
    return *program_status_;
  }
  return 0;
}

void PoolSupervisor::on_exit(Member& m, int wait_status) {
  m.finish_output();
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
  if (watch_.second_sigint(sig)) {
    kill_remaining("a second SIGINT");
    return;
  }
  if (stopping_) return;
  interrupted_by_ = sig;
  fmt::print(stderr, "thdrun: got {}; stopping the pool{}\n", signal_name(sig),
             sig == SIGINT ? " (a second SIGINT kills it)" : "");
  begin_stop();
}

void PoolSupervisor::begin_stop() {
  stopping_ = true;
  for (Member& m : members_) m.restart_at.reset();
  watch_.terminate(members_);
}

void PoolSupervisor::kill_remaining(const std::string& why) {
  watch_.kill(members_, why, [this](const std::vector<const Member*>& left) { return names_of(left); });
}

std::string PoolSupervisor::names_of(const std::vector<const Member*>& members) const {
  std::vector<std::string> names;
  for (const Member* m : members) names.push_back(name(*m));
  return fmt::format("{}", fmt::join(names, ", "));
}

std::optional<PoolSupervisor::Clock::time_point> PoolSupervisor::next_wake(bool waiting_for_ready) const {
  std::optional<Clock::time_point> next = watch_.kill_at();
  for (const Member& m : members_) {
    if (m.restart_at && (!next || *m.restart_at < *next)) next = m.restart_at;
  }
  if (waiting_for_ready) {
    const auto poll_at = Clock::now() + kReadyPoll;
    if (!next || poll_at < *next) next = poll_at;
  }
  return next;
}

}  // namespace thd::launch
