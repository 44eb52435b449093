#include "tools/thdrun/supervisor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>

namespace thd::launch {
namespace {

// "rank 2", "ranks 1, 3"
template <typename Rank>
std::string ranks_text(const std::vector<const Rank*>& ranks) {
  std::vector<int> numbers;
  for (const Rank* r : ranks) numbers.push_back(r->rank);
  return fmt::format("rank{} {}", numbers.size() == 1 ? "" : "s", fmt::join(numbers, ", "));
}

}  // namespace

Supervisor::Supervisor(SignalEvents& signals, SupervisorOptions options)
    : watch_(signals, options.kill_grace, "the ranks") {}

void Supervisor::add(int rank, WatchedProcess process) {
  ranks_.push_back(Rank{std::move(process), rank});
}

int Supervisor::running() const {
  int n = 0;
  for (const Rank& r : ranks_) n += r.process.running() ? 1 : 0;
  return n;
}

int Supervisor::wait() {
  for (;;) {
    watch_.reap(ranks_, [this](Rank& r, int wait_status) { on_exit(r, wait_status); });
    if (running() == 0) break;
    watch_.kill_if_overdue(ranks_, ranks_text<Rank>);
    watch_.wait(ranks_, watch_.kill_at(), [this](int sig) { on_signal(sig); });
  }
  ProcessWatch::finish_output(ranks_);
  return exit_status();
}

void Supervisor::on_exit(Rank& r, int wait_status) {
  const int status = exit_code_of(wait_status);
  if (status == 0 || first_failure_) return;
  first_failure_ = status;
  fmt::print(stderr, "thdrun: rank {} (pid {}) {}\n", r.rank, r.process.pid(), describe_wait_status(wait_status));
  // Also after a forwarded signal: ranks that caught it and go on must not be
  // left running without the one that failed.
  if (running() > 0) begin_stop();
}

void Supervisor::on_signal(int sig) {
  if (watch_.second_sigint(sig)) {
    kill_remaining("a second SIGINT");
    return;
  }
  if (!interrupted_by_) interrupted_by_ = sig;
  fmt::print(stderr, "thdrun: got {}; forwarded it to the ranks{}\n", signal_name(sig),
             sig == SIGINT ? " (a second SIGINT kills them)" : "");
  for (Rank& r : ranks_) r.process.signal_group(sig);
}

void Supervisor::begin_stop() {
  fmt::print(stderr, "thdrun: stopping the other ranks (SIGTERM now, SIGKILL in {})\n",
             seconds_text(watch_.kill_grace()));
  watch_.terminate(ranks_);
}

void Supervisor::kill_remaining(const std::string& why) { watch_.kill(ranks_, why, ranks_text<Rank>); }

int Supervisor::exit_status() const {
  if (first_failure_) return *first_failure_;
  if (interrupted_by_) return 128 + *interrupted_by_;
  return 0;
}

}  // namespace thd::launch
