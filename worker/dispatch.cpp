// The exhaustive switch over the schema's ops: an op added to the schema and not
// handled here does not compile (-Werror=switch).
#include <thd/config.h>

#include "tensor/check.h"
#include "worker/ops.h"
#include "worker/session.h"

namespace thd::worker {

namespace {

void run_command(ExecContext& ctx, const fb::Command& c) {
  switch (c.op_type()) {
    case fb::Op::NONE:
      throw protocol::ProtocolError("command carries no op");
    case fb::Op::Create: return run(ctx, table_of(c.op_as_Create()));
    case fb::Op::Upload: return run(ctx, table_of(c.op_as_Upload()));
    case fb::Op::Fetch: return run(ctx, table_of(c.op_as_Fetch()));
    case fb::Op::Free: return run(ctx, table_of(c.op_as_Free()));
    case fb::Op::Sync: return run(ctx, table_of(c.op_as_Sync()));
    case fb::Op::ManualSeed: return run(ctx, table_of(c.op_as_ManualSeed()));
    case fb::Op::SendTo: return run(ctx, table_of(c.op_as_SendTo()));
    case fb::Op::RecvFrom: return run(ctx, table_of(c.op_as_RecvFrom()));
    case fb::Op::Unary: return run(ctx, table_of(c.op_as_Unary()));
    case fb::Op::Binary: return run(ctx, table_of(c.op_as_Binary()));
    case fb::Op::BinaryScalar: return run(ctx, table_of(c.op_as_BinaryScalar()));
    case fb::Op::Clamp: return run(ctx, table_of(c.op_as_Clamp()));
    case fb::Op::Fill: return run(ctx, table_of(c.op_as_Fill()));
    case fb::Op::CopyFrom: return run(ctx, table_of(c.op_as_CopyFrom()));
    case fb::Op::Cast: return run(ctx, table_of(c.op_as_Cast()));
    case fb::Op::Reduce: return run(ctx, table_of(c.op_as_Reduce()));
    case fb::Op::Softmax: return run(ctx, table_of(c.op_as_Softmax()));
    case fb::Op::Matmul: return run(ctx, table_of(c.op_as_Matmul()));
    case fb::Op::Addmm: return run(ctx, table_of(c.op_as_Addmm()));
    case fb::Op::ViewOp: return run(ctx, table_of(c.op_as_ViewOp()));
    case fb::Op::IndexOp: return run(ctx, table_of(c.op_as_IndexOp()));
    case fb::Op::Scatter: return run(ctx, table_of(c.op_as_Scatter()));
    case fb::Op::MaskedFill: return run(ctx, table_of(c.op_as_MaskedFill()));
    case fb::Op::Where: return run(ctx, table_of(c.op_as_Where()));
    case fb::Op::Join: return run(ctx, table_of(c.op_as_Join()));
    case fb::Op::Split: return run(ctx, table_of(c.op_as_Split()));
    case fb::Op::Sort: return run(ctx, table_of(c.op_as_Sort()));
    case fb::Op::Collective: return run(ctx, table_of(c.op_as_Collective()));
    case fb::Op::StreamCreate: return run(ctx, table_of(c.op_as_StreamCreate()));
    case fb::Op::StreamDestroy: return run(ctx, table_of(c.op_as_StreamDestroy()));
    case fb::Op::EventRecord: return run(ctx, table_of(c.op_as_EventRecord()));
    case fb::Op::EventWait: return run(ctx, table_of(c.op_as_EventWait()));
    case fb::Op::EventNotify: return run(ctx, table_of(c.op_as_EventNotify()));
    case fb::Op::EventWaitRemote: return run(ctx, table_of(c.op_as_EventWaitRemote()));
    case fb::Op::EventQuery: return run(ctx, table_of(c.op_as_EventQuery()));
    case fb::Op::EventDestroy: return run(ctx, table_of(c.op_as_EventDestroy()));
    case fb::Op::StreamQuery: return run(ctx, table_of(c.op_as_StreamQuery()));
    case fb::Op::StatsQuery: return run(ctx, table_of(c.op_as_StatsQuery()));
    case fb::Op::ClockQuery: return run(ctx, table_of(c.op_as_ClockQuery()));
    case fb::Op::TraceDump: return run(ctx, table_of(c.op_as_TraceDump()));
#if THD_ENABLE_TEST_HOOKS
    case fb::Op::TestLatch: return run(ctx, table_of(c.op_as_TestLatch()));
#endif
    case fb::Op::ToDevice: return run(ctx, table_of(c.op_as_ToDevice()));
    case fb::Op::DefineGraph: return run(ctx, table_of(c.op_as_DefineGraph()));
    case fb::Op::ReplayGraph: return run(ctx, table_of(c.op_as_ReplayGraph()));
    case fb::Op::DropGraph: return run(ctx, table_of(c.op_as_DropGraph()));
  }
  THD_THROW(protocol::ProtocolError, "dispatch", "op type {} is not in this protocol version",
            static_cast<int>(c.op_type()));
}

}  // namespace

// What the master's RemoteError says after "op (op N) failed on node K: ": the
// error without the op's name when it is the op that failed (the master names it),
// and where the worker raised it.
std::string failure_text(const ExecContext& ctx, const std::exception& e) {
  const auto* error = dynamic_cast<const Error*>(&e);
  if (error == nullptr || error->context().op != ctx.op_name()) return e.what();
  const ErrorContext& where = error->context();
  if (where.file == nullptr) return error->message();
  return fmt::format("{} ({}:{})", error->message(), where.file, where.line);
}

void fail_op(ExecContext& ctx, const fb::Command& command, const std::string& message, ErrorKind kind) {
  auto poison = ctx.new_poison(message, kind);
  // A wait that failed (its event's node was lost, or it timed out) ordered nothing:
  // what the stream runs after it must not run as if it had waited.
  if (command.op_type() == fb::Op::EventWait || command.op_type() == fb::Op::EventWaitRemote) ctx.inherit(poison);
  ctx.fail(std::move(poison), /*report=*/true);
}

void trace_op(trace::Recorder& rec, ExecContext& ctx, int64_t start, int64_t end) {
  trace::Args args{{"op_id", ctx.op_id()}};
  std::vector<int64_t> ids;
  int64_t bytes = 0;
  for (uint64_t id : ctx.outputs()) {
    ids.push_back(static_cast<int64_t>(id));
    const Entry* e = ctx.table().find(id);
    if (e == nullptr || !e->tensor.defined()) continue;
    if (ids.size() == 1) args.emplace_back("shape", std::vector<int64_t>(e->tensor.shape().begin(), e->tensor.shape().end()));
    bytes += static_cast<int64_t>(e->tensor.nbytes());
  }
  if (!ids.empty()) args.emplace_back("tensors", std::move(ids));
  if (bytes > 0) args.emplace_back("bytes", bytes);
  rec.slice(ctx.session().trace_pid(), static_cast<int32_t>(ctx.stream()), ctx.op_name(), start, end, std::move(args));
}

bool is_control(fb::Op op) {
  switch (op) {
    case fb::Op::Free:
    case fb::Op::Sync:
    case fb::Op::StreamCreate:
    case fb::Op::StreamDestroy:
    case fb::Op::EventNotify:
    case fb::Op::EventQuery:
    case fb::Op::EventDestroy:
    case fb::Op::StreamQuery:
    case fb::Op::StatsQuery:
    case fb::Op::ClockQuery:
    case fb::Op::TraceDump:
    case fb::Op::DefineGraph:
    case fb::Op::DropGraph:
      return true;
    default:
      return false;
  }
}

void dispatch(ExecContext& ctx, const fb::Command& command, Prepared prepared) {
  ctx.begin(command, std::move(prepared));
  const bool control = is_control(command.op_type());
  if (!control) ctx.session().count_op();
  struct Finished {
    Session* s;
    ~Finished() {
      if (s != nullptr) s->op_finished();
    }
  } finished{control ? nullptr : &ctx.session()};
  trace::Recorder* rec = control ? nullptr : ctx.session().recorder();
  const int64_t start = rec != nullptr ? trace::now_ns() : 0;
  struct Slice {
    trace::Recorder* rec;
    ExecContext& ctx;
    int64_t start;
    ~Slice() {
      if (rec != nullptr) trace_op(*rec, ctx, start, trace::now_ns());
    }
  } slice{rec, ctx, start};
  try {
    run_command(ctx, command);
    if (StreamCheck* check = ctx.session().check(); check != nullptr && !ctx.accesses().empty()) {
      const auto hazards = check->checker().on_op(check->key(ctx.stream()), ctx.op_id(), ctx.op_name(),
                                                  ctx.accesses());
      if (!hazards.empty()) THD_THROW(Error, ctx.op_name(), "{}", hazards.front().message());
    }
  } catch (const PoisonedInput& p) {
    ctx.fail(p.poison, /*report=*/false);
  } catch (const PeerLost& e) {
    if (e.context().peer == 0) throw;  // the master: the session is over
    fail_op(ctx, command, failure_text(ctx, e), error_kind_of(e));
  } catch (const std::exception& e) {
    fail_op(ctx, command, failure_text(ctx, e), error_kind_of(e));
  }
}

uint64_t node_seed(uint64_t seed, int node) {
  // splitmix64 of (seed, node): unrelated streams per node, reproducible per seed.
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(node) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace thd::worker
