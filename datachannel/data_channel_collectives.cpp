// DataChannel collectives: checks on the calling rank, then the algorithm (in
// collectives/) on the (group, tag) queue, in issue order.
#include <fmt/format.h>

#include <thd/datachannel.h>

#include "datachannel/channel_util.h"
#include "datachannel/check.h"
#include "datachannel/collective_envelope.h"
#include "datachannel/collective_launch.h"
#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/reduce_kernels.h"

namespace thd {

namespace {

using detail::Comm;
using detail::Envelope;
using detail::GroupState;
using detail::MessageKind;
using detail::MessageOp;
using detail::RequestState;

constexpr int64_t kMaxCollectiveTag = INT32_MAX;

MessageKind kind_of(MessageOp op, DType dtype, int64_t count, int root = -1, ReduceOp reduce = ReduceOp::Sum) {
  return {op, static_cast<uint8_t>(dtype), static_cast<uint8_t>(reduce), root, static_cast<uint64_t>(count)};
}

// An input read while outputs are written: a private copy when it shares memory
// with the output, so no algorithm ever reads what it already overwrote.
Tensor readable_input(const Tensor& input, const Tensor& output) {
  if (output.defined() && input.shares_storage(output)) return input.clone();
  return input.contiguous();
}

void check_same_dtype(const GroupState& g, const Tensor& a, const Tensor& b, std::string_view op) {
  if (a.dtype() == b.dtype()) return;
  THD_THROW_AT(TypeError, std::string(op), g.world_rank(), -1, "output is {} but input is {}; they must match",
               dtype_name(a.dtype()), dtype_name(b.dtype()));
}

void check_numel(const GroupState& g, const Tensor& t, int64_t expected, std::string_view op, std::string_view what,
                 std::string_view rule) {
  if (t.numel() == expected) return;
  THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1, "{} has {} elements (shape {}) but must have {} ({})",
               what, t.numel(), t.shape(), expected, rule);
}

void* data_of(const Tensor& t) { return t.numel() == 0 ? nullptr : t.data_ptr(); }

Request all_reduce_impl(GroupState& g, Tensor& t, ReduceOp op, const CollectiveOptions& o, bool blocking) {
  detail::check_member(g, "all_reduce");
  if (detail::on_device(t)) return detail::device_collectives(g, "all_reduce").all_reduce(g, t, op, o);
  detail::check_tensor(g, t, "all_reduce", "the tensor", true);
  detail::check_reduce_op(t.dtype(), op, "all_reduce");
  const DType dtype = t.dtype();
  const auto count = static_cast<size_t>(t.numel());
  void* data = data_of(t);
  return detail::launch_collective(g, kind_of(MessageOp::AllReduce, dtype, t.numel(), -1, op), o, {t},
                [=](Comm& c) { detail::all_reduce(c, data, count, dtype, op); }, blocking);
}

Request broadcast_impl(GroupState& g, Tensor& t, int root, const CollectiveOptions& o, bool blocking) {
  detail::check_member(g, "broadcast");
  if (detail::on_device(t)) return detail::device_collectives(g, "broadcast").broadcast(g, t, root, o);
  detail::check_rank(g, root, "broadcast", "root");
  detail::check_tensor(g, t, "broadcast", "the tensor", true);
  void* data = data_of(t);
  const size_t nbytes = t.nbytes();
  return detail::launch_collective(g, kind_of(MessageOp::Broadcast, t.dtype(), t.numel(), root), o, {t},
                [=](Comm& c) { detail::broadcast(c, data, nbytes, root); }, blocking);
}

Request reduce_impl(GroupState& g, Tensor& t, int root, ReduceOp op, const CollectiveOptions& o, bool blocking) {
  detail::check_member(g, "reduce");
  if (detail::on_device(t)) return detail::device_collectives(g, "reduce").reduce(g, t, root, op, o);
  detail::check_rank(g, root, "reduce", "root");
  detail::check_tensor(g, t, "reduce", "the tensor", true);
  detail::check_reduce_op(t.dtype(), op, "reduce");
  const DType dtype = t.dtype();
  const auto count = static_cast<size_t>(t.numel());
  void* data = data_of(t);
  return detail::launch_collective(g, kind_of(MessageOp::Reduce, dtype, t.numel(), root, op), o, {t},
                [=](Comm& c) { detail::reduce(c, data, count, dtype, op, root); }, blocking);
}

Request all_gather_impl(GroupState& g, Tensor& out, const Tensor& in, const CollectiveOptions& o, bool blocking) {
  const char* op = "all_gather";
  detail::check_member(g, op);
  if (detail::on_device(in) || detail::on_device(out)) {
    return detail::device_collectives(g, op).all_gather(g, out, in, o);
  }
  detail::check_tensor(g, in, op, "input", false);
  detail::check_tensor(g, out, op, "output", true);
  check_same_dtype(g, out, in, op);
  check_numel(g, out, g.size() * in.numel(), op, "output", "group size x input elements");
  const Tensor src = readable_input(in, out);
  const void* from = data_of(src);
  void* to = data_of(out);
  const size_t block = src.nbytes();
  return detail::launch_collective(g, kind_of(MessageOp::AllGather, in.dtype(), in.numel()), o, {out, src},
                [=](Comm& c) { detail::all_gather(c, from, to, block); }, blocking);
}

Request reduce_scatter_impl(GroupState& g, Tensor& out, const Tensor& in, ReduceOp rop, const CollectiveOptions& o,
                            bool blocking) {
  const char* op = "reduce_scatter";
  detail::check_member(g, op);
  if (detail::on_device(in) || detail::on_device(out)) {
    return detail::device_collectives(g, op).reduce_scatter(g, out, in, rop, o);
  }
  detail::check_tensor(g, in, op, "input", false);
  detail::check_tensor(g, out, op, "output", true);
  check_same_dtype(g, out, in, op);
  detail::check_reduce_op(in.dtype(), rop, op);
  check_numel(g, in, g.size() * out.numel(), op, "input", "group size x output elements");
  const Tensor src = readable_input(in, out);
  const void* from = data_of(src);
  void* to = data_of(out);
  const DType dtype = out.dtype();
  const auto count = static_cast<size_t>(out.numel());
  return detail::launch_collective(g, kind_of(MessageOp::ReduceScatter, dtype, out.numel(), -1, rop), o, {out, src},
                [=](Comm& c) { detail::reduce_scatter(c, from, to, count, dtype, rop); }, blocking);
}

Request gather_impl(GroupState& g, Tensor& out, const Tensor& in, int root, const CollectiveOptions& o,
                    bool blocking) {
  const char* op = "gather";
  detail::check_member(g, op);
  if (detail::on_device(in)) return detail::device_collectives(g, op).gather(g, out, in, root, o);
  detail::check_rank(g, root, op, "root");
  detail::check_tensor(g, in, op, "input", false);
  const bool is_root = g.rank == root;
  if (is_root) {
    detail::check_tensor(g, out, op, "output (on the root)", true);
    check_same_dtype(g, out, in, op);
    check_numel(g, out, g.size() * in.numel(), op, "output", "group size x input elements");
  }
  const Tensor src = readable_input(in, is_root ? out : Tensor());
  const void* from = data_of(src);
  void* to = is_root ? data_of(out) : nullptr;
  const size_t block = src.nbytes();
  std::vector<Tensor> keep{src};
  if (is_root) keep.push_back(out);
  return detail::launch_collective(g, kind_of(MessageOp::Gather, in.dtype(), in.numel(), root), o, std::move(keep),
                [=](Comm& c) { detail::gather(c, from, to, block, root); }, blocking);
}

Request scatter_impl(GroupState& g, Tensor& out, const Tensor& in, int root, const CollectiveOptions& o,
                     bool blocking) {
  const char* op = "scatter";
  detail::check_member(g, op);
  if (detail::on_device(out)) return detail::device_collectives(g, op).scatter(g, out, in, root, o);
  detail::check_rank(g, root, op, "root");
  detail::check_tensor(g, out, op, "output", true);
  const bool is_root = g.rank == root;
  Tensor src;
  if (is_root) {
    detail::check_tensor(g, in, op, "input (on the root)", false);
    check_same_dtype(g, out, in, op);
    check_numel(g, in, g.size() * out.numel(), op, "input", "group size x output elements");
    src = readable_input(in, out);
  }
  const void* from = is_root ? data_of(src) : nullptr;
  void* to = data_of(out);
  const size_t block = out.nbytes();
  std::vector<Tensor> keep{out};
  if (is_root) keep.push_back(src);
  return detail::launch_collective(g, kind_of(MessageOp::Scatter, out.dtype(), out.numel(), root), o, std::move(keep),
                [=](Comm& c) { detail::scatter(c, from, to, block, root); }, blocking);
}

Request all_to_all_impl(GroupState& g, Tensor& out, const Tensor& in, const CollectiveOptions& o, bool blocking) {
  const char* op = "all_to_all";
  detail::check_member(g, op);
  if (detail::on_device(in) || detail::on_device(out)) {
    return detail::device_collectives(g, op).all_to_all(g, out, in, o);
  }
  detail::check_tensor(g, in, op, "input", false);
  detail::check_tensor(g, out, op, "output", true);
  check_same_dtype(g, out, in, op);
  check_numel(g, out, in.numel(), op, "output", "as many as the input");
  if (in.numel() % g.size() != 0) {
    THD_THROW_AT(ValueError, op, g.world_rank(), -1,
                 "input has {} elements, which do not split into {} equal blocks (one per rank)", in.numel(),
                 g.size());
  }
  const Tensor src = readable_input(in, out);
  const void* from = data_of(src);
  void* to = data_of(out);
  const size_t block = src.nbytes() / static_cast<size_t>(g.size());
  return detail::launch_collective(g, kind_of(MessageOp::AllToAll, in.dtype(), in.numel()), o, {out, src},
                [=](Comm& c) { detail::all_to_all(c, from, to, block); }, blocking);
}

Request barrier_impl(GroupState& g, const CollectiveOptions& o, bool blocking) {
  detail::check_member(g, "barrier");
  const MessageKind kind{MessageOp::Barrier, detail::kRawBytes, 0, -1, 0};
  return detail::launch_collective(g, kind, o, {}, [](Comm& c) { detail::barrier(c); }, blocking);
}

}  // namespace

void DataChannel::all_reduce(Tensor& t, ReduceOp op, const CollectiveOptions& o) {
  all_reduce_impl(state(), t, op, o, true).wait();
}
Request DataChannel::iall_reduce(Tensor& t, ReduceOp op, const CollectiveOptions& o) {
  return all_reduce_impl(state(), t, op, o, false);
}
void DataChannel::broadcast(Tensor& t, int root, const CollectiveOptions& o) {
  broadcast_impl(state(), t, root, o, true).wait();
}
Request DataChannel::ibroadcast(Tensor& t, int root, const CollectiveOptions& o) {
  return broadcast_impl(state(), t, root, o, false);
}
void DataChannel::reduce(Tensor& t, int root, ReduceOp op, const CollectiveOptions& o) {
  reduce_impl(state(), t, root, op, o, true).wait();
}
Request DataChannel::ireduce(Tensor& t, int root, ReduceOp op, const CollectiveOptions& o) {
  return reduce_impl(state(), t, root, op, o, false);
}
void DataChannel::all_gather(Tensor& out, const Tensor& in, const CollectiveOptions& o) {
  all_gather_impl(state(), out, in, o, true).wait();
}
Request DataChannel::iall_gather(Tensor& out, const Tensor& in, const CollectiveOptions& o) {
  return all_gather_impl(state(), out, in, o, false);
}
void DataChannel::reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op, const CollectiveOptions& o) {
  reduce_scatter_impl(state(), out, in, op, o, true).wait();
}
Request DataChannel::ireduce_scatter(Tensor& out, const Tensor& in, ReduceOp op, const CollectiveOptions& o) {
  return reduce_scatter_impl(state(), out, in, op, o, false);
}
void DataChannel::gather(Tensor& out, const Tensor& in, int root, const CollectiveOptions& o) {
  gather_impl(state(), out, in, root, o, true).wait();
}
Request DataChannel::igather(Tensor& out, const Tensor& in, int root, const CollectiveOptions& o) {
  return gather_impl(state(), out, in, root, o, false);
}
void DataChannel::scatter(Tensor& out, const Tensor& in, int root, const CollectiveOptions& o) {
  scatter_impl(state(), out, in, root, o, true).wait();
}
Request DataChannel::iscatter(Tensor& out, const Tensor& in, int root, const CollectiveOptions& o) {
  return scatter_impl(state(), out, in, root, o, false);
}
void DataChannel::all_to_all(Tensor& out, const Tensor& in, const CollectiveOptions& o) {
  all_to_all_impl(state(), out, in, o, true).wait();
}
Request DataChannel::iall_to_all(Tensor& out, const Tensor& in, const CollectiveOptions& o) {
  return all_to_all_impl(state(), out, in, o, false);
}
void DataChannel::barrier(const CollectiveOptions& o) { barrier_impl(state(), o, true).wait(); }
Request DataChannel::ibarrier(const CollectiveOptions& o) { return barrier_impl(state(), o, false); }

namespace detail {

Request launch_collective(GroupState& g, const MessageKind& kind, const CollectiveOptions& o, std::vector<Tensor> keep,
                          std::function<void(Comm&)> body, bool blocking) {
  const std::string op{detail::message_op_name(kind.op)};
  detail::check_tag(g, o.tag, op, kMaxCollectiveTag);
  const uint32_t seq = g.next_sequence(o.tag);
  const Envelope env = detail::collective_envelope(g.id, o.tag, seq, kind);
  auto req = detail::make_request(g, op, detail::resolve_timeout(g, o.timeout), /*engine=*/nullptr);
  req->keepalive = std::move(keep);

  auto task = [req, transport = g.transport, ranks = g.world_ranks, rank = g.rank, env, op,
               body = std::move(body)]() {
    try {
      if (net::Clock::now() >= req->deadline()) {
        THD_THROW_AT(TimeoutError, op, transport->rank(), -1,
                     "did not start before its deadline: the collectives issued before it on this group took "
                     "too long");
      }
      Comm comm(*transport, *ranks, rank, env, req->deadline(), op);
      body(comm);
      req->complete(-1, 0);
    } catch (...) {
      req->fail(std::current_exception());
    }
  };
  auto& queue = g.queue(o.tag);
  if (!(blocking && queue.try_run_inline(task))) queue.submit(std::move(task));
  return Request(std::move(req));
}

}  // namespace detail

}  // namespace thd
