// The "dispatch" suite: the master-worker runtime's overheads (command dispatch, a
// sync round trip, tensor copies to and from a worker) next to plain TCP sockets
// doing the same on the same machine, measured in the same run.
//
//   thd-bench dispatch [--backend tcp|ucx|libfabric] [harness options]
//
// This process is the master; it starts one worker and a reference peer, both
// copies of itself (bench/dispatch/job.h), over the chosen backend (tcp by
// default) on loopback. The figures are listed in bench/dispatch/figures.h; the
// reference is plain TCP whatever the backend.
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>

#include <thd/cuda.h>
#include <thd/distributed.h>
#include <thd/store.h>

#include "bench/dispatch/figures.h"
#include "bench/dispatch/job.h"
#include "bench/harness.h"

namespace thd::bench::mw {
namespace {

// The two suites this driver runs: what they measure, and how many workers.
struct SuiteShape {
  const char* name;
  int workers;
  FigureSet figures;
  std::vector<std::string> worker_env;
};
const SuiteShape kDispatch{"dispatch", 1, FigureSet::Dispatch, {}};
// The streams suite holds a stream on a test latch (docs/streams.md).
const SuiteShape kStreams{"streams", 2, FigureSet::Streams, {"THD_TEST_HOOKS=1"}};
// A data-parallel step on three nodes, captured and eager (docs/graphs.md).
const SuiteShape kGraphs{"graphs", 3, FigureSet::Graphs, {}};
// The worker's GPU: skipped where this machine has none.
const SuiteShape kCuda{"mw-cuda", 1, FigureSet::Cuda, {}};

// Every wait of the master, the worker and the peer for one another (rendezvous
// included), and how long the children have to exit after the run: as long as any
// other wait, since a worker under callgrind takes tens of seconds to write its
// profile and exit (docs/performance.md, "Per-op costs").
constexpr std::chrono::seconds kTimeout{120};
constexpr std::chrono::seconds kQuickTimeout{20};

std::chrono::milliseconds timeout_of(const Options& opt) { return opt.quick ? kQuickTimeout : kTimeout; }

int64_t integer_arg(const Options& opt, const std::string& flag, int64_t lo, int64_t hi) {
  return suite_integer_arg(opt, flag, std::nullopt, lo, hi);
}

// Shuts the session down on every path out of the master, before the Job kills the
// worker, so a failed run does not end with a second error about a lost worker.
struct SessionGuard {
  ~SessionGuard() {
    try {
      thd::shutdown();
    } catch (const std::exception& e) {
      std::cerr << "thd-bench: shutdown: " << e.what() << "\n";
    }
  }
};

// --backend NAME; the workers get it as THD_BACKEND. The mpi backend's ranks are
// mpirun's, which this driver does not start.
std::string backend_of(const Options& opt) {
  const auto it = opt.suite_args.find("--backend");
  const std::string backend = it == opt.suite_args.end() ? "tcp" : it->second;
  if (backend == "mpi") {
    throw std::invalid_argument("the master-worker suites start their workers themselves; --backend mpi needs "
                                "mpirun (measure it with mpirun -n 2 ... quickstart-like programs instead)");
  }
  return backend;
}

void run_master(Context& ctx, const SuiteShape& suite) {
  if (suite.figures == FigureSet::Cuda && !cuda::is_available()) {
    std::cerr << "thd-bench " << suite.name << ": skipped: no CUDA device\n";
    return;
  }
  const Options& opt = ctx.options();
  const auto timeout = timeout_of(opt);
  const std::string backend = backend_of(opt);
  std::vector<std::string> worker_env = suite.worker_env;
  worker_env.push_back("THD_BACKEND=" + backend);
  std::unique_ptr<Job> job = Job::start(suite.name, opt.args, timeout, suite.workers, worker_env);
  try {
    SessionGuard session;
    thd::init_master_worker({.backend = backend,
                             .init_method = job->init_method(),
                             .world_size = suite.workers + 1,
                             .rank = 0,
                             .timeout = timeout,
                             .token = job->token()});
    run_figures(ctx, {.role = Role::Master, .figures = suite.figures, .store = job->store(), .timeout = timeout});
    thd::shutdown();
  } catch (const std::exception& e) {
    // A child that has ended with an error may be the cause (a dead worker) or a
    // consequence (the peer gives up waiting for a master that hangs): name both.
    try {
      job->check_children();
    } catch (const std::exception& child) {
      throw std::runtime_error(fmt::format("{}; meanwhile {}", e.what(), child.what()));
    }
    throw;
  }
  job->finish(timeout_of(opt));
}

[[noreturn]] void run_worker(const Options& opt) {
  dc::die_with_parent(static_cast<pid_t>(integer_arg(opt, kParentPidFlag, 1, INT32_MAX)));
  // RANK=1: serves as node 0 and exits the process when the master shuts down.
  thd::init_master_worker({.backend = "", .timeout = timeout_of(opt)});  // THD_BACKEND, from the master
  throw std::logic_error("init_master_worker returned on rank 1");
}

void run_peer(Context& ctx, const SuiteShape& suite) {
  const Options& opt = ctx.options();
  dc::die_with_parent(static_cast<pid_t>(integer_arg(opt, kParentPidFlag, 1, INT32_MAX)));
  const auto timeout = timeout_of(opt);
  // The token comes from THD_AUTH_TOKEN, which the master set.
  auto store = std::make_shared<TCPStore>(TCPStoreOptions{
      .host = "127.0.0.1",
      .port = static_cast<uint16_t>(integer_arg(opt, kStorePortFlag, 1, 65535)),
      .is_server = false,
      .timeout = timeout,
  });
  run_figures(ctx, {.role = Role::Peer, .figures = suite.figures, .store = store, .timeout = timeout});
}

void run_suite(Context& ctx, const SuiteShape& suite) {
  const auto role = ctx.options().suite_args.find(kRoleFlag);
  if (role == ctx.options().suite_args.end()) {
    run_master(ctx, suite);
  } else if (role->second == kWorkerRole) {
    run_worker(ctx.options());
  } else if (role->second == kPeerRole) {
    run_peer(ctx, suite);
  } else {
    throw std::invalid_argument(fmt::format("{} must be {} or {}, got '{}'", kRoleFlag, kWorkerRole, kPeerRole,
                                            role->second));
  }
}

// Internal options: what the master passes to the workers and the peer it starts.
const std::vector<SuiteOption> kChildOptions{
    {"--backend", "NAME", "the DataChannel backend of the master and its workers (default tcp)"},
    {kOpsFlag, "N", "ops per timed call of the dispatch figures (default 1000000; 1000 with --quick)"},
    {kRoleFlag, "ROLE", ""},
    {kParentPidFlag, "PID", ""},
    {kStorePortFlag, "PORT", ""},
};

[[maybe_unused]] const bool registered_dispatch = register_suite({
    kDispatch.name,
    "master-worker runtime: dispatch rate, sync round trip, copies, vs plain TCP",
    [](Context& ctx) { run_suite(ctx, kDispatch); },
    kChildOptions,
});

[[maybe_unused]] const bool registered_streams = register_suite({
    kStreams.name,
    "streams and events: cross-node event latency vs a TCP round trip, two-stream overlap",
    [](Context& ctx) { run_suite(ctx, kStreams); },
    kChildOptions,
});

[[maybe_unused]] const bool registered_graphs = register_suite({
    kGraphs.name,
    "graphs: a 3-node data-parallel step (matmuls, all_reduce, update) replayed vs issued eagerly",
    [](Context& ctx) { run_suite(ctx, kGraphs); },
    kChildOptions,
});

[[maybe_unused]] const bool registered_cuda = register_suite({
    kCuda.name,
    "master-worker runtime on the worker's GPU: tiny-op dispatch rate, 1 GiB upload to the GPU",
    [](Context& ctx) { run_suite(ctx, kCuda); },
    kChildOptions,
});

}  // namespace
}  // namespace thd::bench::mw
