// The graph commands that run on the command loop (docs/graphs.md): a graph's
// definition and its end. A replay is scheduled by the command loop itself
// (worker.cpp), which hands the graph's commands to their streams.
#include "protocol/framing.h"
#include "tensor/check.h"
#include "tensor/log.h"
#include "worker/graphs.h"
#include "worker/ops.h"
#include "worker/session.h"

namespace thd::worker {

void run(ExecContext& ctx, const fb::DefineGraph& op) {
  Session& session = ctx.session();
  if (session.graphs().find(op.graph()).known) {
    THD_THROW(ValueError, "define_graph", "graph id {} is already in use (the master never reuses an id)", op.graph());
  }
  const std::vector<uint64_t> owned = protocol::scalars_of(op.owned());
  for (uint64_t id : owned) {
    if (id != 0 && session.table().find(id) != nullptr) {
      THD_THROW(protocol::ProtocolError, "define_graph",
                "graph {} owns tensor id {}, which is live already (a graph's tensors are made by its replays)",
                op.graph(), id);
    }
  }
  // From here a refused definition poisons the tensors the graph would have made: a
  // get of one raises the refusal, not "never created".
  for (uint64_t id : owned) ctx.target(id);
  std::shared_ptr<const GraphDef> graph;
  try {
    if (session.refuses_graphs()) {
      THD_THROW(ValueError, "define_graph", "node {} refuses graph definitions (test hook THD_TEST_REFUSE_GRAPHS)",
                ctx.node());
    }
    std::span<const uint8_t> bytes;
    if (op.commands() != nullptr) bytes = {op.commands()->data(), op.commands()->size()};
    graph = std::make_shared<const GraphDef>(op.graph(), bytes, owned);
  } catch (const Error&) {
    if (op.graph() != 0) session.graphs().define_refused(op.graph());
    throw;
  }
  session.graphs().define(std::move(graph));
}

void answer_definition(Session& session, const fb::Command& command) {
  const fb::DefineGraph* op = command.op_as_DefineGraph();
  if (op == nullptr || op->reply_tag() == 0) return;
  // After the refusal's OpFailed, if any: the master handles that many replies
  // before it reads the verdict.
  flatbuffers::FlatBufferBuilder b(64);
  auto body = fb::CreateSyncDone(b, op->graph(), session.table().size(), session.replies_sent());
  b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::SyncDone, body.Union()));
  try {
    protocol::send_message(session.channel(), 0, op->reply_tag(), {b.GetBufferPointer(), b.GetSize()},
                           session.timeout());
  } catch (const PeerLost&) {
    throw;  // the master: the command loop ends the session
  } catch (const std::exception& e) {
    // The master's wait for the verdict gives up on its own (its progress timeout).
    THD_LOG_WARN("worker node {}: the verdict on graph {} was not sent: {}", session.node(), op->graph(), e.what());
  }
}

void run(ExecContext& ctx, const fb::DropGraph& op) {
  if (!ctx.session().graphs().erase(op.graph())) {
    THD_THROW(ValueError, "Graph::reset", "graph {} is not defined on node {} (reset twice, or never captured)",
              op.graph(), ctx.node());
  }
}

void run(ExecContext&, const fb::ReplayGraph&) {
  // schedule() (worker.cpp) expands a replay before it would get here; a graph's own
  // commands never hold one (GraphDef refuses it).
  THD_THROW(protocol::ProtocolError, "Graph::replay", "a replay runs only from the command loop");
}

}  // namespace thd::worker
