// Worker-to-worker copies (to_node) and collectives among workers: tensor bytes go
// straight between the workers over the DataChannel, never through the master.
#include <algorithm>
#include <optional>
#include <string>

#include "datachannel/collectives/float32_accumulation.h"
#include "datachannel/runtime_queries.h"
#include "protocol/framing.h"
#include "tensor/check.h"
#include "worker/collective_path.h"
#include "worker/graph_collective.h"
#include "worker/graphs.h"
#include "worker/ops.h"
#include "worker/replay_into.h"
#include "worker/session.h"
#include "worker/sizes.h"

namespace thd::worker {

void check_peer(const ExecContext& ctx, int peer_node, const char* op) {
  const int nodes = ctx.node() >= 0 ? const_cast<ExecContext&>(ctx).channel().size() - 1 : 0;
  if (peer_node < 0 || peer_node >= nodes || peer_node == ctx.node()) {
    THD_THROW(ValueError, op, "peer node {} is not another node of this session (nodes 0..{}, this is {})", peer_node,
              nodes - 1, ctx.node());
  }
}

void check_transfer_tag(int64_t tag, const char* op) {
  if (tag < protocol::kTransferTagBase || tag >= protocol::kTransferTagBase + protocol::kTagRange) {
    THD_THROW(protocol::ProtocolError, op, "transfer tag {} is outside the transfer range", tag);
  }
}

namespace {

ReduceOp reduce_op_of(uint8_t code) {
  if (code > static_cast<uint8_t>(ReduceOp::BXor)) {
    THD_THROW(protocol::ProtocolError, "collective", "reduce op code {} is not a thd::ReduceOp", code);
  }
  return static_cast<ReduceOp>(code);
}

}  // namespace

// A copy is preceded by a status message: "ok", or the poison of the source (the
// original failure: op, message, node), which the receiving worker adopts, so the
// master raises the error where it began whichever copy it fetches.
void send_status(ExecContext& ctx, const fb::SendTo& op, const Poison* poison) {
  flatbuffers::FlatBufferBuilder b(256);
  flatbuffers::Offset<void> body;
  fb::Body type = fb::Body::Ack;
  if (poison != nullptr) {
    type = fb::Body::FetchFailed;
    body = fb::CreateFetchFailed(b, op.tag(), poison->op_id, b.CreateString(poison->op_name),
                                 b.CreateString(poison->message), poison->node, protocol::to_fb(poison->kind),
                                 poison->graph, poison->replay)
               .Union();
  } else {
    body = fb::CreateAck(b, 0).Union();
  }
  b.Finish(fb::CreateMessage(b, protocol::kVersion, type, body));
  protocol::send_message(ctx.channel(), op.peer_node() + 1, op.tag(), {b.GetBufferPointer(), b.GetSize()},
                         ctx.timeout());
}

void run(ExecContext& ctx, const fb::SendTo& op) {
  check_peer(ctx, op.peer_node(), "to_node");
  check_transfer_tag(op.tag(), "to_node");
  const Entry* e = ctx.table().find(op.src());
  if (e == nullptr) {
    const Poison unknown{ctx.op_id(), ctx.op_name(),
                         ctx.session().graphs().not_live(op.src(), ctx.node()),
                         ctx.node(), ErrorKind::Value};
    send_status(ctx, op, &unknown);
    ctx.input(op.src());  // reports the unknown id as this op's failure
  }
  if (auto poison = ctx.poison_of(e)) {
    send_status(ctx, op, poison.get());
    throw PoisonedInput{poison};
  }
  if (needs_host_copy(e->tensor)) {
    try {
      ctx.reserve(bytes_of(numel_of(e->tensor.shape()), e->tensor.dtype()), Device::cpu());
    } catch (const Error& refused) {  // the receiving node waits for a status: tell it why
      const Poison why{ctx.op_id(), ctx.op_name(), refused.message(), ctx.node(), error_kind_of(refused)};
      send_status(ctx, op, &why);
      throw;
    }
  }
  // A GPU tensor goes through host memory: copied before the status, so a failing
  // copy is the status the receiver gets.
  Tensor bytes;
  try {
    bytes = host_contiguous(e->tensor);
  } catch (const Error& failed) {
    const Poison why{ctx.op_id(), ctx.op_name(), failed.message(), ctx.node(), error_kind_of(failed)};
    send_status(ctx, op, &why);
    throw;
  }
  send_status(ctx, op, nullptr);
  ctx.flow(static_cast<uint64_t>(op.tag()), /*begin=*/true);
  ctx.channel().send(bytes, op.peer_node() + 1, {.tag = op.tag(), .timeout = ctx.timeout()});
}

void run(ExecContext& ctx, const fb::RecvFrom& op) {
  ctx.fresh(op.out());
  check_peer(ctx, op.peer_node(), "to_node");
  check_transfer_tag(op.tag(), "to_node");
  const Shape shape = protocol::shape_from_fb(op.shape(), "to_node");
  const DType dtype = protocol::from_fb(op.dtype());
  const Device device = protocol::from_fb(op.device());
  // In a replay, a CPU copy lands in the storage the previous replay's holds (its
  // size was checked against the memory limit when it was made). Otherwise the
  // bytes land in new host memory, then go to the device.
  const Tensor* kept = device.is_cpu() ? kept_landing(ctx, op.out(), shape, dtype) : nullptr;
  Tensor out;
  if (kept != nullptr) {
    out = *kept;
  } else {
    ctx.reserve(bytes_of(numel_of(shape), dtype), Device::cpu());
    out = Tensor::empty(shape, dtype);
  }
  const Message status =
      protocol::recv_message(ctx.channel(), op.peer_node() + 1, op.tag(), size_t{1} << 20, ctx.timeout());
  const fb::Message& m = protocol::verify_message(status, "to_node");
  if (const fb::FetchFailed* f = m.body_as_FetchFailed()) {
    throw PoisonedInput{std::make_shared<const Poison>(Poison{
        f->op_id(), f->op_name() ? f->op_name()->str() : "op", f->message() ? f->message()->str() : "", f->node(),
        protocol::from_fb(f->kind()), f->graph(), f->replay()})};
  }
  ctx.channel().recv(out, op.peer_node() + 1, {.tag = op.tag(), .timeout = ctx.timeout()});
  ctx.flow(static_cast<uint64_t>(op.tag()), /*begin=*/false);
  // Checked once the bytes are in: the sender is never left waiting for a receive
  // that a refused device would have skipped.
  if (kept != nullptr) return;
  if (!device.is_cpu()) {
    ctx.reserve(out.nbytes(), device);
    out = out.to(device);
  }
  ctx.define(op.out(), std::move(out));
}

namespace {

bool reduces(fb::CollectiveKind kind) {
  return kind == fb::CollectiveKind::AllReduce || kind == fb::CollectiveKind::Reduce ||
         kind == fb::CollectiveKind::ReduceScatter;
}

// The float32 scratch a float16/bfloat16 reduction runs on (the input widened, and
// a reduce_scatter's output: datachannel/collectives/float32_accumulation.h), on
// the host or on the GPU, whichever way the collective goes.
uint64_t accumulation_bytes(fb::CollectiveKind kind, const Tensor& t, ReduceOp reduce, uint64_t out_numel) {
  if (!reduces(kind) || !detail::accumulates_in_float32(t.dtype(), reduce)) return 0;
  const uint64_t numel = saturating_add(numel_of(t.shape()), kind == fb::CollectiveKind::ReduceScatter ? out_numel : 0);
  return bytes_of(numel, kFloat32);
}

[[noreturn]] void throw_cannot_take_part(const ExecContext& ctx, int32_t bad) {
  THD_THROW(ValueError, ctx.op_name(), "node {} cannot take part: its input was poisoned by an earlier failure, "
            "or it refused the collective (node {}'s error says why)", bad - 1, bad - 1);
}

// A replay's all_reduce in the form its members settled on (worker/graph_collective.h):
// one exchange, each member's word beside its data. False when a member's tensor
// is no longer laid out as settled: every member then drops the settlement, the
// tensors are as they were, and the full exchange follows.
bool all_reduce_settled(ExecContext& ctx, DataChannel& group, SettledCollective& settled, const Entry& e,
                        const std::shared_ptr<const Poison>& poison, const std::optional<std::string>& refused,
                        ReduceOp reduce, const CollectiveOptions& options) {
  ReplayWord mine;
  if (poison || refused) mine.refused_node = ctx.node() + 1;
  else mine.stale = layout_of(e.tensor) != settled.layout();
  Tensor& t = const_cast<Tensor&>(e.tensor);
  // A member that sends no data of its own still sends a message of the settled size.
  Tensor stand_in;
  if (mine != ReplayWord{}) stand_in = Tensor::zeros({settled.layout().numel}, settled.layout().dtype);
  const std::vector<int64_t> words =
      detail::flagged_all_reduce(group, stand_in.defined() ? stand_in : t, reduce, encode_word(mine), options,
                                 settled.rooted());
  const ReplayWord all = combine_words(words);
  if (poison) throw PoisonedInput{poison};
  if (refused) THD_THROW(ValueError, ctx.op_name(), "{}", *refused);
  if (all.refused_node > 0) throw_cannot_take_part(ctx, all.refused_node);
  if (all.stale) {
    settled.unsettle();
    return false;
  }
  return true;
}

}  // namespace

void run(ExecContext& ctx, const fb::Collective& op) {
  // In the order the command loop read the collectives, whatever stream runs them.
  Session& session = ctx.session();
  const uint64_t turn = ctx.prepared().value;
  session.await_turn(turn, "collective");
  struct EndTurn {
    Session& s;
    uint64_t turn;
    ~EndTurn() { s.end_turn(turn); }
  } end_turn{session, turn};
  const bool makes_output =
      op.kind() == fb::CollectiveKind::AllGather || op.kind() == fb::CollectiveKind::ReduceScatter;
  if (makes_output) ctx.fresh(op.out());
  else ctx.target(op.tensor());
  std::vector<int> nodes;
  if (op.nodes() != nullptr) nodes.assign(op.nodes()->begin(), op.nodes()->end());
  bool member = false;
  for (int n : nodes) {
    if (n < 0 || n >= ctx.channel().size() - 1) {
      THD_THROW(protocol::ProtocolError, "collective", "node {} is not a node of this session", n);
    }
    member = member || n == ctx.node();
  }
  if (!member) THD_THROW(protocol::ProtocolError, "collective", "node {} is not among the nodes {}", ctx.node(), nodes);
  if (op.trace_id() != 0) {
    // Arrows from the first member to each other one.
    for (size_t i = 1; i < nodes.size(); ++i) {
      if (ctx.node() == nodes[0]) ctx.flow(collective_flow_id(op.trace_id(), i), /*begin=*/true);
      else if (ctx.node() == nodes[i]) ctx.flow(collective_flow_id(op.trace_id(), i), /*begin=*/false);
    }
  }
  const Entry* e = ctx.table().find(op.tensor());
  if (e == nullptr) ctx.input(op.tensor());  // the unknown-id error
  DataChannel& group = ctx.group(nodes);
  const ReduceOp reduce = reduce_op_of(op.reduce_op());
  const CollectiveOptions options{.tag = 0, .timeout = ctx.timeout()};
  // A member whose input is poisoned must neither leave the others waiting nor let
  // them compute with data that is missing: the members first agree on whether any
  // input is poisoned (a 4-byte all_reduce), and then all of them poison their
  // outputs instead of running the collective.
  const auto poison = ctx.poison_of(e);
  // So is a member that cannot allocate what it needs (the output; a CPU tensor's
  // contiguous copy) or was sent an output shape it refuses: it takes part in the
  // agreement first. Staging a GPU tensor's bytes through host memory is needed on
  // the host path only: a member that cannot says so, and fails the collective
  // only if the members stage.
  // A poisoned input may hold no tensor at all.
  const bool on_gpu = !poison && !e->tensor.device().is_cpu();
  std::optional<std::string> refused;
  std::optional<std::string> cannot_stage;
  // In a replay, the output of a CPU tensor's collective is written into the
  // storage the previous replay's holds, which needs no reservation.
  const Tensor* landing = nullptr;
  if (!poison) {
    try {
      const Shape out_shape = makes_output ? protocol::shape_from_fb(op.out_shape(), "collective") : Shape{};
      const uint64_t out_numel = makes_output ? numel_of(out_shape) : 0;
      if (makes_output && e->tensor.device().is_cpu()) {
        landing = kept_landing(ctx, op.out(), out_shape, e->tensor.dtype(), {&e->tensor});
      }
      const uint64_t out_bytes = landing != nullptr ? 0 : bytes_of(out_numel, e->tensor.dtype());
      const uint64_t staged_bytes =
          needs_host_copy(e->tensor) ? bytes_of(numel_of(e->tensor.shape()), e->tensor.dtype()) : 0;
      // A group of one reduces nothing: no copy.
      const uint64_t wide_bytes = nodes.size() > 1 ? accumulation_bytes(op.kind(), e->tensor, reduce, out_numel) : 0;
      const uint64_t host_bytes = saturating_add(saturating_add(staged_bytes, out_bytes), wide_bytes);
      if (on_gpu) {
        if (const uint64_t device_bytes = saturating_add(out_bytes, wide_bytes); device_bytes != 0) {
          ctx.reserve(device_bytes, e->tensor.device());
        }
        try {
          // Staged, the output is made on the host first.
          ctx.reserve(host_bytes, Device::cpu());
        } catch (const Error& err) {
          cannot_stage = err.message();
        }
      } else {
        ctx.reserve(host_bytes, Device::cpu());
      }
    } catch (const Error& err) {
      refused = err.message();
    }
  }
  // In a graph's replay, an all_reduce its members settled on goes in one exchange.
  SettledCollective* settled = nullptr;
  if (const GraphRun* replay = ctx.prepared().graph; replay != nullptr && op.kind() == fb::CollectiveKind::AllReduce) {
    settled = &replay->graph->settled(ctx.prepared().index);
    if (settled->fused() && all_reduce_settled(ctx, group, *settled, *e, poison, refused, reduce, options)) return;
  }
  // The same exchange settles the way the tensors go (worker/collective_path.h):
  // each member offers the GPU its tensor could take part from, if the group's
  // device collectives can run there (a group whose NCCL communicator broke, or
  // is on another GPU, stages instead of failing).
  MemberClaim mine;
  if (poison || refused) {
    mine.refused_node = ctx.node() + 1;
  } else {
    if (cannot_stage) mine.cannot_stage_node = ctx.node() + 1;
    try {
      if (auto gpu = device_path_gpu(e->tensor, reduces(op.kind()) ? std::optional(reduce) : std::nullopt);
          gpu && detail::device_collectives_usable(group, e->tensor.device().index())) {
        mine.gpu = *gpu;
      }
    } catch (const Error&) {
      // Its GPU cannot be named: this member stages through host memory, and so do the others.
    }
    if (settled != nullptr) {
      try {
        mine.fused = fused_key(group, layout_of(e->tensor), reduce);
      } catch (const Error& err) {  // a malformed setting: this member refuses, so nobody waits for it
        refused = err.message();
        mine = MemberClaim{};
        mine.refused_node = ctx.node() + 1;
      }
    }
  }
  // The claims are words of this frame, not tensors of the allocator: a replay's
  // collective allocates nothing of its own.
  ClaimWords my_words = claim_words(mine);
  std::vector<int64_t> all_words(static_cast<size_t>(group.size() * kClaimWords));
  Tensor claim_rows = Tensor::from_blob(all_words.data(), {group.size(), kClaimWords}, kInt64);
  group.all_gather(claim_rows, Tensor::from_blob(my_words.data(), {kClaimWords}, kInt64), options);
  const std::vector<MemberClaim> claims = decode_claims(claim_rows);
  if (poison) throw PoisonedInput{poison};
  if (refused) THD_THROW(ValueError, ctx.op_name(), "{}", *refused);
  int32_t bad = 0;
  for (const MemberClaim& c : claims) bad = std::max(bad, c.refused_node);
  if (bad > 0) throw_cannot_take_part(ctx, bad);
  if (settled != nullptr) settled->settle(claims, layout_of(e->tensor));
  const CollectivePath path = choose_path(claims);
  if (path == CollectivePath::Host) {
    if (cannot_stage) THD_THROW(ValueError, ctx.op_name(), "staging through host memory: {}", *cannot_stage);
    if (const int32_t node = unable_to_stage(claims); node > 0) {
      THD_THROW(ValueError, ctx.op_name(), "node {} cannot stage its GPU tensor through host memory, and the members "
                "cannot go device to device (node {}'s error says why)", node - 1, node - 1);
    }
  }
  auto participate = [&](Tensor& t) {
    switch (op.kind()) {
      case fb::CollectiveKind::AllReduce: return group.all_reduce(t, reduce, options);
      case fb::CollectiveKind::Broadcast: return group.broadcast(t, op.root(), options);
      case fb::CollectiveKind::Reduce: return group.reduce(t, op.root(), reduce, options);
      case fb::CollectiveKind::AllGather:
      case fb::CollectiveKind::ReduceScatter: {
        Tensor out = landing != nullptr
                         ? *landing
                         : Tensor::empty(protocol::shape_from_fb(op.out_shape(), "collective"), t.dtype(), t.device());
        if (op.kind() == fb::CollectiveKind::AllGather) group.all_gather(out, t, options);
        else group.reduce_scatter(out, t, reduce, options);
        if (landing != nullptr) return;
        // On the input's device, as the master recorded it.
        ctx.define(op.out(), out.to(e->tensor.device()));
        return;
      }
    }
    THD_THROW(protocol::ProtocolError, "collective", "collective kind {} is not in this protocol version",
              static_cast<int>(op.kind()));
  };
  // GPU tensors on GPUs of their own go device to device (the DataChannel hands
  // them to NCCL, on this stream's CUDA stream); otherwise a GPU tensor takes part
  // through a host copy, and so does a strided one.
  Tensor& t = const_cast<Tensor&>(e->tensor);
  if (path == CollectivePath::Device || !needs_host_copy(t)) {
    participate(t);
  } else {
    Tensor staged = host_contiguous(t);
    participate(staged);
    if (!makes_output) t.copy_(t.device().is_cpu() ? staged : staged.to(t.device()));
  }
}

}  // namespace thd::worker
