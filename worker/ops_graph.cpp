// The graph commands that run on the command loop (docs/graphs.md): a graph's
// definition and its end. A replay is scheduled by the command loop itself
// (worker.cpp), which hands the graph's commands to their streams.
#include "tensor/check.h"
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
    std::span<const uint8_t> bytes;
    if (op.commands() != nullptr) bytes = {op.commands()->data(), op.commands()->size()};
    graph = std::make_shared<const GraphDef>(op.graph(), bytes, owned);
  } catch (const Error&) {
    if (op.graph() != 0) session.graphs().define_refused(op.graph());
    throw;
  }
  session.graphs().define(std::move(graph));
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
