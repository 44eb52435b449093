// The worker's op handlers, one per command table of the schema. Each declares its
// outputs (ctx.output) before it reads its inputs (ctx.input), so a poisoned or
// failing input poisons exactly what the op would have written.
#pragma once

#include <thd/config.h>

#include "protocol/codec.h"
#include "streams/trace.h"
#include "worker/exec_context.h"

#include <span>
#include <string>
#include <vector>

namespace thd::worker {

namespace fb = protocol::fb;

// The command's table, or ProtocolError when the union's type came without one.
template <typename T>
const T& table_of(const T* table) {
  if (table == nullptr) throw protocol::ProtocolError("command names an op but carries no arguments");
  return *table;
}

void run(ExecContext& ctx, const fb::Create& op);
void run(ExecContext& ctx, const fb::Upload& op);
void run(ExecContext& ctx, const fb::Fetch& op);
void run(ExecContext& ctx, const fb::Free& op);
void run(ExecContext& ctx, const fb::Sync& op);
void run(ExecContext& ctx, const fb::ManualSeed& op);
void run(ExecContext& ctx, const fb::SendTo& op);
void run(ExecContext& ctx, const fb::RecvFrom& op);
void run(ExecContext& ctx, const fb::Collective& op);

void run(ExecContext& ctx, const fb::StreamCreate& op);
void run(ExecContext& ctx, const fb::StreamDestroy& op);
void run(ExecContext& ctx, const fb::EventRecord& op);
void run(ExecContext& ctx, const fb::EventWait& op);
void run(ExecContext& ctx, const fb::EventNotify& op);
void run(ExecContext& ctx, const fb::EventWaitRemote& op);
void run(ExecContext& ctx, const fb::EventQuery& op);
void run(ExecContext& ctx, const fb::EventDestroy& op);
void run(ExecContext& ctx, const fb::StreamQuery& op);
void run(ExecContext& ctx, const fb::StatsQuery& op);
void run(ExecContext& ctx, const fb::ClockQuery& op);
void run(ExecContext& ctx, const fb::TraceDump& op);
#if THD_ENABLE_TEST_HOOKS
void run(ExecContext& ctx, const fb::TestLatch& op);
#endif

void run(ExecContext& ctx, const fb::Unary& op);
void run(ExecContext& ctx, const fb::Binary& op);
void run(ExecContext& ctx, const fb::BinaryScalar& op);
void run(ExecContext& ctx, const fb::Clamp& op);
void run(ExecContext& ctx, const fb::Fill& op);
void run(ExecContext& ctx, const fb::CopyFrom& op);
void run(ExecContext& ctx, const fb::Cast& op);
void run(ExecContext& ctx, const fb::ToDevice& op);
void run(ExecContext& ctx, const fb::Reduce& op);
void run(ExecContext& ctx, const fb::Softmax& op);
void run(ExecContext& ctx, const fb::Matmul& op);
void run(ExecContext& ctx, const fb::Addmm& op);

void run(ExecContext& ctx, const fb::ViewOp& op);
void run(ExecContext& ctx, const fb::IndexOp& op);
void run(ExecContext& ctx, const fb::Scatter& op);
void run(ExecContext& ctx, const fb::MaskedFill& op);
void run(ExecContext& ctx, const fb::Where& op);
void run(ExecContext& ctx, const fb::Join& op);
void run(ExecContext& ctx, const fb::Split& op);
void run(ExecContext& ctx, const fb::Sort& op);

void run(ExecContext& ctx, const fb::DefineGraph& op);
void run(ExecContext& ctx, const fb::ReplayGraph& op);
void run(ExecContext& ctx, const fb::DropGraph& op);
// The node's verdict on a DefineGraph that asks for one (its reply_tag), sent by the
// command loop once the definition has run.
void answer_definition(Session& session, const fb::Command& command);

// Runs one command; a failure poisons its outputs and is reported, never thrown.
// Throws only PeerLost for the master (the session is over).
void dispatch(ExecContext& ctx, const fb::Command& command, Prepared prepared = {});

// A generator seed for `node` from the session's seed: nodes draw different streams.
uint64_t node_seed(uint64_t seed, int node);

// Erases the tensors (a GPU tensor's memory reused once the node's CUDA streams are
// done with it); the first id that was not live (0: all were).
uint64_t erase_tensors(Session& session, std::span<const uint64_t> ids);
// A free of `ids` (a Free command, or a batch's frees) on the default stream: at once
// while no other stream holds work; else once the work the node's streams hold now
// has run (as CUDA's caching allocator waits for the streams that used a block). At
// once: returns the first id that was not live (0: all were). Later: an id not live
// is reported as a failure of `op_id`, and 0 is returned.
uint64_t free_tensors(Session& session, std::span<const uint64_t> ids, uint64_t op_id);
// An OpFailed reply for `op` (its id and name) with `message` and `kind`, from any thread.
void report_failure(Session& session, const Poison& op, const std::string& message, ErrorKind kind);

// The tensor an Upload's bytes are received into: the shape and dtype it
// announces, once they are valid and within the session's memory limit
// (ProtocolError, ValueError otherwise, before anything is allocated).
struct UploadSpec {
  Shape shape;
  DType dtype;
};
UploadSpec upload_spec(Session& session, const fb::Upload& op);

// Tensor bytes leave and enter a worker through host memory (the DataChannel moves
// host buffers; GPU-direct transfers are a later step): a GPU tensor, or a strided
// one, needs a host copy first (host_contiguous).
inline bool needs_host_copy(const Tensor& t) { return !t.device().is_cpu() || !t.is_contiguous(); }
inline Tensor host_contiguous(const Tensor& t) {
  return t.device().is_cpu() ? t.contiguous() : t.to(Device::cpu()).contiguous();
}

// ValueError unless `peer_node` is another node of the session.
void check_peer(const ExecContext& ctx, int peer_node, const char* op);
// ProtocolError unless `tag` is in the worker-to-worker transfer range.
void check_transfer_tag(int64_t tag, const char* op);

// Where a command runs (docs/streams.md): control commands on the command loop at
// once, whatever their stream; the others on their stream.
bool is_control(fb::Op op);

// Answers a get that cannot be served with `why`, on the reply channel with the
// fetch's tag: the master waits for the get's answer there, not for an OpFailed.
void answer_fetch_failed(ExecContext& ctx, const fb::Fetch& op, const Poison& why);

// A failed op: its outputs poisoned and the failure reported (a failed event wait
// poisons its stream too).
void fail_op(ExecContext& ctx, const fb::Command& command, const std::string& message, ErrorKind kind);

// The trace's slice of the op ctx just ran.
void trace_op(trace::Recorder& rec, ExecContext& ctx, int64_t start, int64_t end);

// Flow ids of the trace: an event record and its waits; a collective's arrows from
// its first member to each other one (transfer tags, the third kind, are below 2^42).
inline uint64_t event_flow_id(uint64_t event, uint64_t generation) {
  return (uint64_t{1} << 62) | (event << 20) | (generation & 0xfffff);
}
inline uint64_t collective_flow_id(uint64_t trace_id, size_t member) {
  return (uint64_t{1} << 63) | (trace_id << 12) | (member & 0xfff);
}

}  // namespace thd::worker
