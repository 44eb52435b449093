// Process-group mode: the default group behind thd's free functions, groups as
// arguments, and global ranks translated to group ranks.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <mutex>

#include <thd/process_group.h>

#include "datachannel/backend_choice.h"
#include "datachannel/check.h"
#include "datachannel/collective_lists.h"
#include "datachannel/group_state.h"

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

// The group a call runs on: the one given, else the default group.
std::shared_ptr<ProcessGroup> group_of(const Group& group, const char* op) { return group ? group : current(op); }

// A global rank's rank in `g`; ValueError naming it when it is not a member.
int group_rank_of(const ProcessGroup& g, int global_rank, const char* op, const char* what) {
  const int r = detail::position_in(g.world_ranks(), global_rank);
  if (r < 0) {
    THD_THROW(ValueError, op, "{} rank {} is not in the group (its members are global ranks {})", what, global_rank,
              g.world_ranks());
  }
  return r;
}

// A peer of a point-to-point call: kAnySource stays kAnySource.
int peer_in(const ProcessGroup& g, int global_rank, const char* op, const char* what) {
  return global_rank == kAnySource ? kAnySource : group_rank_of(g, global_rank, op, what);
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
int get_rank(const Group& group) { return group_of(group, "get_rank")->rank(); }
int get_world_size(const Group& group) { return group_of(group, "get_world_size")->size(); }
std::string get_backend() { return current("get_backend")->backend(); }
std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks) { return current("new_group")->new_group(std::move(ranks)); }

int get_group_rank(const Group& group, int global_rank) {
  return group_rank_of(*group_of(group, "get_group_rank"), global_rank, "get_group_rank", "global");
}

int get_global_rank(const Group& group, int group_rank) {
  const auto g = group_of(group, "get_global_rank");
  if (group_rank < 0 || group_rank >= g->size()) {
    THD_THROW(ValueError, "get_global_rank", "group rank {} is out of range for a group of size {}", group_rank,
              g->size());
  }
  return g->world_ranks()[static_cast<size_t>(group_rank)];
}

// ---- point to point --------------------------------------------------------------------

void send(const Tensor& t, int dst, const Group& group, const P2POptions& o) {
  const auto g = group_of(group, "send");
  g->send(t, peer_in(*g, dst, "send", "destination"), o);
}

int recv(Tensor& t, int src, const Group& group, const P2POptions& o) {
  const auto g = group_of(group, "recv");
  const int from = g->recv(t, peer_in(*g, src, "recv", "source"), o);
  return g->world_ranks()[static_cast<size_t>(from)];
}

Work isend(const Tensor& t, int dst, const Group& group, const P2POptions& o) {
  const auto g = group_of(group, "isend");
  return g->isend(t, peer_in(*g, dst, "isend", "destination"), o);
}

Work irecv(Tensor& t, int src, const Group& group, const P2POptions& o) {
  const auto g = group_of(group, "irecv");
  return g->irecv(t, peer_in(*g, src, "irecv", "source"), o);
}

// ---- collectives: each blocking form is its async form waited for ---------------------------

Work iall_reduce(Tensor& t, ReduceOp op, const Group& group, const CollectiveOptions& o) {
  return group_of(group, "all_reduce")->iall_reduce(t, op, o);
}
Work ibroadcast(Tensor& t, int src, const Group& group, const CollectiveOptions& o) {
  const auto g = group_of(group, "broadcast");
  return g->ibroadcast(t, group_rank_of(*g, src, "broadcast", "src"), o);
}
Work ireduce(Tensor& t, int dst, ReduceOp op, const Group& group, const CollectiveOptions& o) {
  const auto g = group_of(group, "reduce");
  return g->ireduce(t, group_rank_of(*g, dst, "reduce", "dst"), op, o);
}
Work ibarrier(const Group& group, const CollectiveOptions& o) { return group_of(group, "barrier")->ibarrier(o); }
Work iall_gather(Tensor& out, const Tensor& in, const Group& group, const CollectiveOptions& o) {
  return group_of(group, "all_gather")->iall_gather(out, in, o);
}
Work iall_gather_into_tensor(Tensor& out, const Tensor& in, const Group& group, const CollectiveOptions& o) {
  return group_of(group, "all_gather_into_tensor")->iall_gather(out, in, o);
}
Work ireduce_scatter(Tensor& out, const Tensor& in, ReduceOp op, const Group& group, const CollectiveOptions& o) {
  return group_of(group, "reduce_scatter")->ireduce_scatter(out, in, op, o);
}
Work ireduce_scatter_tensor(Tensor& out, const Tensor& in, ReduceOp op, const Group& group,
                            const CollectiveOptions& o) {
  return group_of(group, "reduce_scatter_tensor")->ireduce_scatter(out, in, op, o);
}
Work igather(Tensor& out, const Tensor& in, int dst, const Group& group, const CollectiveOptions& o) {
  const auto g = group_of(group, "gather");
  return g->igather(out, in, group_rank_of(*g, dst, "gather", "dst"), o);
}
Work iscatter(Tensor& out, const Tensor& in, int src, const Group& group, const CollectiveOptions& o) {
  const auto g = group_of(group, "scatter");
  return g->iscatter(out, in, group_rank_of(*g, src, "scatter", "src"), o);
}
Work iall_to_all(Tensor& out, const Tensor& in, const Group& group, const CollectiveOptions& o) {
  return group_of(group, "all_to_all")->iall_to_all(out, in, o);
}

namespace {
// The list forms run on the group's state, and a blocking call may run inline.
Work all_gather_list(const std::vector<Tensor>& list, const Tensor& t, const Group& group, const CollectiveOptions& o,
                     bool blocking) {
  return detail::all_gather_list(detail::state_of(*group_of(group, "all_gather")), list, t, o, blocking);
}
Work gather_list(const Tensor& t, const std::vector<Tensor>& list, int dst, const Group& group,
                 const CollectiveOptions& o, bool blocking) {
  const auto g = group_of(group, "gather");
  return detail::gather_list(detail::state_of(*g), t, list, group_rank_of(*g, dst, "gather", "dst"), o, blocking);
}
Work scatter_list(Tensor& t, const std::vector<Tensor>& list, int src, const Group& group, const CollectiveOptions& o,
                  bool blocking) {
  const auto g = group_of(group, "scatter");
  return detail::scatter_list(detail::state_of(*g), t, list, group_rank_of(*g, src, "scatter", "src"), o, blocking);
}
Work reduce_scatter_list(Tensor& out, const std::vector<Tensor>& list, ReduceOp op, const Group& group,
                         const CollectiveOptions& o, bool blocking) {
  return detail::reduce_scatter_list(detail::state_of(*group_of(group, "reduce_scatter")), out, list, op, o, blocking);
}
Work all_to_all_list(const std::vector<Tensor>& outs, const std::vector<Tensor>& ins, const Group& group,
                     const CollectiveOptions& o, bool blocking) {
  return detail::all_to_all_list(detail::state_of(*group_of(group, "all_to_all")), outs, ins, o, blocking);
}
Work all_to_all_split(Tensor& out, const Tensor& in, const std::vector<int64_t>& out_splits,
                      const std::vector<int64_t>& in_splits, const Group& group, const CollectiveOptions& o,
                      bool blocking) {
  return detail::all_to_all_single(detail::state_of(*group_of(group, "all_to_all_single")), out, in, out_splits, in_splits, o,
                                   blocking);
}
}  // namespace

Work iall_gather(const std::vector<Tensor>& list, const Tensor& t, const Group& group, const CollectiveOptions& o) {
  return all_gather_list(list, t, group, o, false);
}
Work igather(const Tensor& t, const std::vector<Tensor>& list, int dst, const Group& group,
             const CollectiveOptions& o) {
  return gather_list(t, list, dst, group, o, false);
}
Work iscatter(Tensor& t, const std::vector<Tensor>& list, int src, const Group& group, const CollectiveOptions& o) {
  return scatter_list(t, list, src, group, o, false);
}
Work ireduce_scatter(Tensor& out, const std::vector<Tensor>& list, ReduceOp op, const Group& group,
                     const CollectiveOptions& o) {
  return reduce_scatter_list(out, list, op, group, o, false);
}
Work iall_to_all(const std::vector<Tensor>& outs, const std::vector<Tensor>& ins, const Group& group,
                 const CollectiveOptions& o) {
  return all_to_all_list(outs, ins, group, o, false);
}
Work iall_to_all_single(Tensor& out, const Tensor& in, const std::vector<int64_t>& out_splits,
                        const std::vector<int64_t>& in_splits, const Group& group, const CollectiveOptions& o) {
  return all_to_all_split(out, in, out_splits, in_splits, group, o, false);
}

void all_reduce(Tensor& t, ReduceOp op, const Group& group, const CollectiveOptions& o) {
  group_of(group, "all_reduce")->all_reduce(t, op, o);
}
void broadcast(Tensor& t, int src, const Group& group, const CollectiveOptions& o) {
  const auto g = group_of(group, "broadcast");
  g->broadcast(t, group_rank_of(*g, src, "broadcast", "src"), o);
}
void reduce(Tensor& t, int dst, ReduceOp op, const Group& group, const CollectiveOptions& o) {
  const auto g = group_of(group, "reduce");
  g->reduce(t, group_rank_of(*g, dst, "reduce", "dst"), op, o);
}
void barrier(const Group& group, const CollectiveOptions& o) { group_of(group, "barrier")->barrier(o); }
void all_gather(Tensor& out, const Tensor& in, const Group& group, const CollectiveOptions& o) {
  group_of(group, "all_gather")->all_gather(out, in, o);
}
void all_gather_into_tensor(Tensor& out, const Tensor& in, const Group& group, const CollectiveOptions& o) {
  group_of(group, "all_gather_into_tensor")->all_gather(out, in, o);
}
void reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op, const Group& group, const CollectiveOptions& o) {
  group_of(group, "reduce_scatter")->reduce_scatter(out, in, op, o);
}
void reduce_scatter_tensor(Tensor& out, const Tensor& in, ReduceOp op, const Group& group,
                           const CollectiveOptions& o) {
  group_of(group, "reduce_scatter_tensor")->reduce_scatter(out, in, op, o);
}
void gather(Tensor& out, const Tensor& in, int dst, const Group& group, const CollectiveOptions& o) {
  const auto g = group_of(group, "gather");
  g->gather(out, in, group_rank_of(*g, dst, "gather", "dst"), o);
}
void scatter(Tensor& out, const Tensor& in, int src, const Group& group, const CollectiveOptions& o) {
  const auto g = group_of(group, "scatter");
  g->scatter(out, in, group_rank_of(*g, src, "scatter", "src"), o);
}
void all_to_all(Tensor& out, const Tensor& in, const Group& group, const CollectiveOptions& o) {
  group_of(group, "all_to_all")->all_to_all(out, in, o);
}

void all_gather(const std::vector<Tensor>& list, const Tensor& t, const Group& group, const CollectiveOptions& o) {
  all_gather_list(list, t, group, o, true).wait();
}
void gather(const Tensor& t, const std::vector<Tensor>& list, int dst, const Group& group,
            const CollectiveOptions& o) {
  gather_list(t, list, dst, group, o, true).wait();
}
void scatter(Tensor& t, const std::vector<Tensor>& list, int src, const Group& group, const CollectiveOptions& o) {
  scatter_list(t, list, src, group, o, true).wait();
}
void reduce_scatter(Tensor& out, const std::vector<Tensor>& list, ReduceOp op, const Group& group,
                    const CollectiveOptions& o) {
  reduce_scatter_list(out, list, op, group, o, true).wait();
}
void all_to_all(const std::vector<Tensor>& outs, const std::vector<Tensor>& ins, const Group& group,
                const CollectiveOptions& o) {
  all_to_all_list(outs, ins, group, o, true).wait();
}
void all_to_all_single(Tensor& out, const Tensor& in, const std::vector<int64_t>& out_splits,
                       const std::vector<int64_t>& in_splits, const Group& group, const CollectiveOptions& o) {
  all_to_all_split(out, in, out_splits, in_splits, group, o, true).wait();
}

}  // namespace thd
