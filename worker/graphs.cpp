#include "worker/graphs.h"

#include <cstring>

#include <thd/config.h>

#include "protocol/graph_ops.h"
#include "tensor/check.h"

namespace thd::worker {

namespace fb = protocol::fb;

bool graph_may_hold(fb::Op op) { return protocol::in_graph(op) == protocol::InGraph::Held; }

GraphDef::GraphDef(uint64_t id, std::span<const uint8_t> message, std::vector<uint64_t> owned)
    : id_(id), owned_list_(std::move(owned)) {
  constexpr const char* kOp = "define_graph";
  if (id == 0) THD_THROW(protocol::ProtocolError, kOp, "graph id 0 is reserved for \"no graph\"");
  if (message.empty()) THD_THROW(protocol::ProtocolError, kOp, "graph {} carries no commands", id);
  // The bytes sit inside the DefineGraph's message at any alignment, and that
  // message goes once its batch has run: the graph keeps an aligned copy of its own.
  auto bytes = std::make_unique<uint8_t[]>(message.size());
  std::memcpy(bytes.get(), message.data(), message.size());
  message_ = Message(std::move(bytes), message.size(), 0);
  const fb::Message& m = protocol::verify_message(message_, kOp);
  const fb::CommandBatch* batch = m.body_as_CommandBatch();
  if (batch == nullptr) {
    THD_THROW(protocol::ProtocolError, kOp, "graph {} holds a {} message, not a CommandBatch", id,
              fb::EnumNameBody(m.body_type()));
  }
  if (batch->commands() == nullptr || batch->commands()->size() == 0) {
    THD_THROW(protocol::ProtocolError, kOp, "graph {} holds no commands", id);
  }
  commands_.reserve(batch->commands()->size());
  for (const fb::Command* c : *batch->commands()) {
    if (c->op() == nullptr) {
      THD_THROW(protocol::ProtocolError, kOp, "command {} (op {}) of graph {} names an op but carries no arguments",
                commands_.size(), c->id(), id);
    }
    if (!graph_may_hold(c->op_type())) {
      const char* name = fb::EnumNameOp(c->op_type());
      THD_THROW(protocol::ProtocolError, kOp, "command {} (op {}) of graph {} is a {}, which a graph cannot hold",
                commands_.size(), c->id(), id, *name != '\0' ? name : "op unknown to this protocol version");
    }
    if (c->stream() != 0) default_stream_only_ = false;
    commands_.push_back(c);
  }
  lookups_.resize(commands_.size());
  settled_.resize(commands_.size());
  plans_ = KeptPlans(commands_.size());
  for (uint64_t t : owned_list_) {
    if (t == 0) THD_THROW(protocol::ProtocolError, kOp, "graph {} owns tensor id 0, which means \"no tensor\"", id);
    owned_.insert(t);
  }
}

const Entry* GraphDef::lookup(size_t index, uint64_t id, const HandleTable& table) const {
  Lookups& kept = lookups_[index];
  const uint64_t erasures = table.erasures();
  if (kept.erasures == erasures) {
    for (size_t i = 0; i < kept.size; ++i) {
      if (kept.ids[i] == id) return kept.entries[i];
    }
  } else {
    kept.size = 0;
    kept.erasures = erasures;
  }
  const Entry* e = table.find(id);
  // Not live yet (a tensor the graph makes, before its first replay): looked up
  // again next time.
  if (e != nullptr && kept.size < Lookups::kMax) {
    kept.ids[kept.size] = id;
    kept.entries[kept.size] = e;
    ++kept.size;
  }
  return e;
}

bool GraphDef::owns(size_t index, uint64_t tensor) const {
  Lookups& kept = lookups_[index];
  for (size_t i = 0; i < kept.made; ++i) {
    if (kept.made_ids[i] == tensor) return true;
  }
  if (!owns(tensor)) return false;
  if (kept.made < kept.made_ids.size()) kept.made_ids[kept.made++] = tensor;
  return true;
}

void GraphTable::check_new(uint64_t id) const {
  if (id == 0) THD_THROW(ValueError, "define_graph", "graph id 0 is reserved for \"no graph\"");
  if (graphs_.count(id) != 0) {
    THD_THROW(ValueError, "define_graph", "graph id {} is already in use (the master never reuses an id)", id);
  }
}

void GraphTable::define(std::shared_ptr<const GraphDef> graph) {
  check_new(graph->id());
  const uint64_t id = graph->id();
  graphs_.emplace(id, std::move(graph));
}

void GraphTable::define_refused(uint64_t id) {
  check_new(id);
  graphs_.emplace(id, nullptr);
}

GraphTable::Found GraphTable::find(uint64_t id) const {
  auto it = graphs_.find(id);
  if (it == graphs_.end()) return {};
  return {true, it->second};
}

bool GraphTable::erase(uint64_t id) { return graphs_.erase(id) != 0; }

std::string GraphTable::not_live(uint64_t id, int node) const {
  for (const auto& [graph_id, graph] : graphs_) {
    // A graph's tensors enter the table in its first replay, and stay.
    if (graph != nullptr && graph->owns(id)) {
      return fmt::format("tensor id {} is made by graph {}, which has not been replayed on node {} yet: a graph's "
                         "tensors hold values only from its first replay on (Graph::replay)",
                         id, graph_id, node);
    }
  }
  return fmt::format("tensor id {} is not live on node {} (never created, or already freed)", id, node);
}

}  // namespace thd::worker
