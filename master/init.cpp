// init_master_worker and shutdown: joining the job, the session's lifetime, and
// the worker side of an SPMD launch (ranks > 0 serve and exit).
#include <cstdlib>
#include <memory>
#include <random>

#include <thd/store.h>

#include "master/backend_choice.h"
#include "master/job_mode.h"
#include "master/pool_attach.h"
#include "master/session.h"
#include "master/spmd_launch.h"
#include "tensor/check.h"
#include "tensor/log.h"
#include "worker/worker.h"

namespace thd {

namespace {

std::once_flag g_atexit_once;

// A master that returns from main without thd::shutdown() still ends its session,
// so SPMD workers exit cleanly instead of waiting for a master that is gone.
void shutdown_at_exit() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    THD_LOG_WARN("thd: shutdown at exit: {}", e.what());
  }
}

uint64_t random_u64() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// The channel is destroyed before exit(): its progress thread drives the backend's
// library, and exit() runs that library's own exit handlers, which then tore it
// down under the running thread (UCX aborted "failed to modify event handler", or
// glibc found the heap corrupted, in workers that exited with their channel alive).
[[noreturn]] void serve_and_exit(std::shared_ptr<DataChannel> channel) {
  int status = 0;
  const int node = channel->rank() - 1;
  try {
    const worker::SessionEnd end = worker::serve(channel);
    if (end != worker::SessionEnd::Goodbye) {
      THD_LOG_ERROR("thd worker node {}: session ended: {}", node, worker::session_end_name(end));
      status = 1;
    }
  } catch (const std::exception& e) {
    THD_LOG_ERROR("thd worker node {}: {}", node, e.what());
    status = 1;
  }
  channel->shutdown();
  const std::weak_ptr<DataChannel> left = channel;
  channel.reset();
  if (!left.expired()) {
    THD_LOG_ERROR("thd worker node {}: its DataChannel is still referenced after the session ended; exiting with it "
                  "alive", node);
    status = 1;
  }
  std::exit(status);
}

}  // namespace

void init_master_worker(const MasterWorkerOptions& requested) {
  MasterWorkerOptions options = requested;
  options.backend = master::chosen_backend(requested.backend);
  if (master::has_current_session()) {
    THD_THROW(ValueError, "init_master_worker", "master-worker mode is already initialized; call thd::shutdown() first");
  }
  if (options.max_ops_in_flight < 1 || options.max_bytes_in_flight < 1 || options.batch_bytes < 1) {
    THD_THROW(ValueError, "init_master_worker", "flow-control limits and batch size must be positive");
  }
  if (options.max_streams_per_node < 1 ||
      static_cast<size_t>(options.max_streams_per_node) > protocol::kMaxStreamsPerNode) {
    THD_THROW(ValueError, "init_master_worker", "max_streams_per_node is {}; it must be 1..{}",
              options.max_streams_per_node, protocol::kMaxStreamsPerNode);
  }
  std::shared_ptr<Store> store;
  int rank = 0;
  int world_size = 0;
  std::function<void()> detach;
  RendezvousOptions rv;
  if (master::names_a_pool(options)) {
    master::PoolSession pool = master::attach_to_pool(options);
    store = pool.store;
    world_size = pool.world_size;
    detach = pool.detach;
  } else {
    rv.init_method = options.init_method;
    rv.rank = options.rank;
    rv.world_size = options.world_size;
    rv.timeout = options.timeout;
    rv.token = options.token;
    master::check_launch_has_workers(rv);
    RendezvousResult joined = rendezvous(rv);
    store = joined.store;
    rank = joined.rank;
    world_size = joined.world_size;
  }
  if (world_size < 2) {
    if (detach) detach();
    THD_THROW(ValueError, "init_master_worker",
              "master-worker mode needs at least one worker: world size is {} (the master is rank 0, workers are "
              "ranks 1..N)",
              world_size);
  }
  DataChannelOptions dc;
  dc.store = store;
  dc.rank = rank;
  dc.world_size = world_size;
  dc.timeout = options.timeout;
  dc.token = options.token;
  dc.bind_host = options.bind_host;
  std::shared_ptr<DataChannel> channel;
  try {
    channel = DataChannel::create(options.backend, dc);
  } catch (...) {
    if (detach) detach();
    throw;
  }
  if (rank != 0) {
    store.reset();  // the channel holds what it needs of it, and goes first
    dc.store.reset();
    serve_and_exit(std::move(channel));
  }

  // Every worker is connected: from here a lost worker is the master's to handle.
  if (!detach) master::announce_master_worker_job();
  auto session = std::make_shared<master::Session>(channel, options, detach);
  session->start(random_u64(), default_generator().seed());
  master::set_current_session(session);
  if (!detach) master::note_session_started(rv);
  std::call_once(g_atexit_once, [] { std::atexit(shutdown_at_exit); });
}

bool is_master() { return master::has_current_session(); }

void shutdown() {
  std::shared_ptr<master::Session> session = master::take_current_session();
  if (!session) return;  // not initialized, or shut down already
  if (auto error = session->close()) std::rethrow_exception(error);
}

int num_nodes() { return master::current_session("num_nodes")->num_nodes(); }

void synchronize() { master::current_session("synchronize")->synchronize(); }

void manual_seed_all(uint64_t seed) {
  auto s = master::current_session("manual_seed_all");
  for (int n = 0; n < s->num_nodes(); ++n) {
    s->link(n, "manual_seed_all").append(protocol::fb::Op::ManualSeed, [&](auto& b) {
      return protocol::fb::CreateManualSeed(b, seed).Union();
    });
  }
}

namespace detail {
std::vector<uint64_t> live_tensors_per_node() {
  return master::current_session("live_tensors_per_node")->live_tensors();
}
}  // namespace detail

}  // namespace thd
