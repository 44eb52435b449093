// Process-group mode: the default group behind thd's free functions.
#include <mutex>

#include <thd/process_group.h>

#include "datachannel/backend_choice.h"
#include "datachannel/check.h"

namespace thd {

namespace {

std::mutex g_mu;
std::shared_ptr<ProcessGroup> g_default;

std::shared_ptr<ProcessGroup> current(const char* op) {
  std::lock_guard lock(g_mu);
  if (!g_default) {
    THD_THROW(ValueError, op, "the default process group is not initialized; call thd::init_process_group() first");
  }
  return g_default;
}

}  // namespace

void init_process_group(const ProcessGroupOptions& options) {
  std::lock_guard lock(g_mu);
  if (g_default) {
    THD_THROW(ValueError, "init_process_group",
              "the default process group is already initialized (rank {} of {}); call "
              "thd::destroy_process_group() first",
              g_default->rank(), g_default->size());
  }
  // Resolved first: a backend that is not built fails before the rendezvous waits.
  const std::string backend = detail::chosen_backend(options.backend);
  RendezvousOptions rv;
  rv.init_method = options.init_method;
  rv.rank = options.rank;
  rv.world_size = options.world_size;
  rv.timeout = options.timeout;
  rv.token = options.token;
  RendezvousResult joined = rendezvous(rv);

  DataChannelOptions dc;
  dc.store = joined.store;
  dc.rank = joined.rank;
  dc.world_size = joined.world_size;
  dc.timeout = options.timeout;
  dc.token = options.token;
  dc.bind_host = options.bind_host;
  g_default = DataChannel::create(backend, dc);
}

bool is_initialized() {
  std::lock_guard lock(g_mu);
  return g_default != nullptr;
}

void destroy_process_group() {
  std::shared_ptr<ProcessGroup> gone;
  {
    std::lock_guard lock(g_mu);
    gone = std::move(g_default);
  }
  // Groups made from it that the program still holds must not keep working on a
  // job it has left. Released outside the lock: closing joins threads.
  if (gone) gone->shutdown();
}

std::shared_ptr<ProcessGroup> default_group() { return current("default_group"); }
int get_rank() { return current("get_rank")->rank(); }
int get_world_size() { return current("get_world_size")->size(); }
std::string get_backend() { return current("get_backend")->backend(); }
std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks) { return current("new_group")->new_group(std::move(ranks)); }

void send(const Tensor& t, int dst, const P2POptions& o) { current("send")->send(t, dst, o); }
int recv(Tensor& t, int src, const P2POptions& o) { return current("recv")->recv(t, src, o); }
Request isend(const Tensor& t, int dst, const P2POptions& o) { return current("isend")->isend(t, dst, o); }
Request irecv(Tensor& t, int src, const P2POptions& o) { return current("irecv")->irecv(t, src, o); }

void all_reduce(Tensor& t, ReduceOp op, const CollectiveOptions& o) { current("all_reduce")->all_reduce(t, op, o); }
void broadcast(Tensor& t, int root, const CollectiveOptions& o) { current("broadcast")->broadcast(t, root, o); }
void reduce(Tensor& t, int root, ReduceOp op, const CollectiveOptions& o) {
  current("reduce")->reduce(t, root, op, o);
}
void all_gather(Tensor& out, const Tensor& in, const CollectiveOptions& o) {
  current("all_gather")->all_gather(out, in, o);
}
void reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op, const CollectiveOptions& o) {
  current("reduce_scatter")->reduce_scatter(out, in, op, o);
}
void gather(Tensor& out, const Tensor& in, int root, const CollectiveOptions& o) {
  current("gather")->gather(out, in, root, o);
}
void scatter(Tensor& out, const Tensor& in, int root, const CollectiveOptions& o) {
  current("scatter")->scatter(out, in, root, o);
}
void all_to_all(Tensor& out, const Tensor& in, const CollectiveOptions& o) {
  current("all_to_all")->all_to_all(out, in, o);
}
void barrier(const CollectiveOptions& o) { current("barrier")->barrier(o); }

Request iall_reduce(Tensor& t, ReduceOp op, const CollectiveOptions& o) {
  return current("iall_reduce")->iall_reduce(t, op, o);
}
Request ibroadcast(Tensor& t, int root, const CollectiveOptions& o) {
  return current("ibroadcast")->ibroadcast(t, root, o);
}

}  // namespace thd
