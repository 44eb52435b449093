// thd-worker: one node of a worker pool (docs/worker_pool.md). options.h reads the
// command line; worker/pool.h does the serving.
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <thd/error.h>

#include "tensor/log.h"
#include "tools/thd_worker/options.h"
#include "worker/pool.h"

namespace {

constexpr int kUsageError = 2;
constexpr int kWorkerError = 1;

// Set from the signal handler; lock-free atomics are async-signal-safe.
std::atomic<bool> stop_requested{false};
std::atomic<bool> in_session{false};
static_assert(std::atomic<bool>::is_always_lock_free);

// Between sessions the serving loop sees the flag and returns. During a session
// there is no point at which to return early, so the worker ends the way the
// signal would have ended it: its master then sees this node as lost, as it would
// for any worker that dies.
extern "C" void on_stop_signal(int sig) {
  stop_requested.store(true);
  if (in_session.load()) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
}

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  // A peer that vanishes mid-write is an error to report, not a reason to die.
  ::signal(SIGPIPE, SIG_IGN);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace thd;
  const std::vector<std::string> args(argv + 1, argv + argc);
  worker_cli::ParsedArgs parsed;
  try {
    parsed = worker_cli::parse_args(args);
  } catch (const ValueError& e) {
    fmt::print(stderr, "thd-worker: {}\n{}\nRun 'thd-worker --help' for the options.\n", e.message(),
               worker_cli::usage_line());
    return kUsageError;
  }
  switch (parsed.action) {
    case worker_cli::Action::Help:
      fmt::print("{}", worker_cli::help_text());
      return 0;
    case worker_cli::Action::Version:
      fmt::print("{}\n", worker_cli::version_text());
      return 0;
    case worker_cli::Action::Serve:
      break;
  }

  worker::PoolOptions& options = parsed.pool;
  const int node = options.node;
  options.stop = &stop_requested;
  options.on_session_begin = [node](uint64_t session) {
    in_session.store(true);
    // A stop that came while the session was being taken up: end as during one.
    if (stop_requested.load()) ::raise(SIGTERM);
    THD_LOG_INFO("thd-worker node {}: serving session {}", node, session);
  };
  options.on_session_end = [node](uint64_t session, const std::string& how) {
    in_session.store(false);
    THD_LOG_INFO("thd-worker node {}: session {} ended: {}", node, session, how);
  };
  install_signal_handlers();

  try {
    worker::serve_pool(options);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "thd-worker node {}: {}\n", node, e.what());
    return kWorkerError;
  }
}
