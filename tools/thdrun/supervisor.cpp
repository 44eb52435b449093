#include "tools/thdrun/supervisor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string_view>

#include "master/job_mode.h"
#include "tools/thdrun/fd.h"

namespace thd::launch {
namespace {

// True when `path` holds exactly what the master writes in a master-worker job.
bool says_master_worker(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return false;  // not written (yet): an SPMD job, or one still starting
  const std::string_view expected = master::kMasterWorkerJobMode;
  char buf[64];
  size_t got = 0;
  while (got < sizeof buf) {
    const ssize_t n = ::read(fd.get(), buf + got, sizeof buf - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  return std::string_view(buf, got) == expected;
}

// "rank 2", "ranks 1, 3"
template <typename Rank>
std::string ranks_text(const std::vector<const Rank*>& ranks) {
  std::vector<int> numbers;
  for (const Rank* r : ranks) numbers.push_back(r->rank);
  return fmt::format("rank{} {}", numbers.size() == 1 ? "" : "s", fmt::join(numbers, ", "));
}

}  // namespace

Supervisor::Supervisor(SignalEvents& signals, SupervisorOptions options)
    : options_(std::move(options)), watch_(signals, options_.kill_grace, "the ranks") {}

void Supervisor::add(int rank, WatchedProcess process) {
  ranks_.push_back(Rank{std::move(process), rank});
}

int Supervisor::running() const {
  int n = 0;
  for (const Rank& r : ranks_) n += r.process.running() ? 1 : 0;
  return n;
}

bool Supervisor::master_decides() const {
  switch (options_.on_rank_failure) {
    case OnRankFailure::KillAll:
      return false;
    case OnRankFailure::MasterDecides:
      return true;
    case OnRankFailure::Auto:
      return !options_.job_mode_file.empty() && says_master_worker(options_.job_mode_file);
  }
  return false;
}

int Supervisor::wait() {
  for (;;) {
    watch_.reap(ranks_, [this](Rank& r, int wait_status) { on_exit(r, wait_status); });
    if (running() == 0) break;
    if (stop_at_ && !stopping_ && Clock::now() >= *stop_at_) {
      std::vector<const Rank*> left;
      for (const Rank& r : ranks_) {
        if (r.process.running()) left.push_back(&r);
      }
      fmt::print(stderr, "thdrun: the master has exited; {} still running after {}: stopping them (SIGTERM now, "
                 "SIGKILL in {})\n", ranks_text<Rank>(left), seconds_text(watch_.kill_grace()),
                 seconds_text(watch_.kill_grace()));
      stopping_ = true;
      watch_.terminate(ranks_);
    }
    watch_.kill_if_overdue(ranks_, ranks_text<Rank>);
    watch_.wait(ranks_, next_deadline(), [this](int sig) { on_signal(sig); });
  }
  ProcessWatch::finish_output(ranks_);
  return exit_status();
}

std::optional<Supervisor::Clock::time_point> Supervisor::next_deadline() const {
  std::optional<Clock::time_point> next = watch_.kill_at();
  if (stop_at_ && !stopping_ && (!next || *stop_at_ < *next)) next = stop_at_;
  return next;
}

void Supervisor::on_exit(Rank& r, int wait_status) {
  const int status = exit_code_of(wait_status);
  if (first_failure_) return;  // kill-all has ended the job
  if (master_status_) {
    // A worker failing on its own after the master has exited, before thdrun stopped it.
    if (status != 0 && !stopping_) {
      fmt::print(stderr, "thdrun: rank {} (pid {}) {} after the master exited\n", r.rank, r.process.pid(),
                 describe_wait_status(wait_status));
    }
    return;
  }
  if (!master_decides()) {
    if (status == 0) return;
    first_failure_ = status;
    fmt::print(stderr, "thdrun: rank {} (pid {}) {}\n", r.rank, r.process.pid(), describe_wait_status(wait_status));
    // Also after a forwarded signal: ranks that caught it and go on must not be
    // left running without the one that failed.
    if (running() > 0) begin_stop();
    return;
  }
  if (r.rank == 0) {
    on_master_exit(r, wait_status);
    return;
  }
  if (status == 0) return;
  fmt::print(stderr, "thdrun: rank {} (pid {}) {}; the job goes on: the master (rank 0) decides what it means "
             "(--on-rank-failure master-decides)\n", r.rank, r.process.pid(), describe_wait_status(wait_status));
}

void Supervisor::on_master_exit(Rank& r, int wait_status) {
  master_status_ = exit_code_of(wait_status);
  if (*master_status_ != 0) {
    fmt::print(stderr, "thdrun: rank {} (pid {}), the master, {}\n", r.rank, r.process.pid(),
               describe_wait_status(wait_status));
  }
  if (running() == 0) return;
  if (*master_status_ != 0) {
    begin_stop();
    return;
  }
  // Workers leave by themselves after the master's shutdown; the grace period is
  // for one that does not (it lost the master's goodbye, or hangs).
  stop_at_ = Clock::now() + watch_.kill_grace();
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
  stopping_ = true;
  fmt::print(stderr, "thdrun: stopping the other ranks (SIGTERM now, SIGKILL in {})\n",
             seconds_text(watch_.kill_grace()));
  watch_.terminate(ranks_);
}

void Supervisor::kill_remaining(const std::string& why) {
  stopping_ = true;
  watch_.kill(ranks_, why, ranks_text<Rank>);
}

int Supervisor::exit_status() const {
  if (first_failure_) return *first_failure_;
  if (master_status_ && *master_status_ != 0) return *master_status_;
  if (interrupted_by_) return 128 + *interrupted_by_;
  return 0;
}

}  // namespace thd::launch
