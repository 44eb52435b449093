#include "master/graph.h"

#include <algorithm>
#include <set>

#include "protocol/graph_ops.h"
#include "tensor/check.h"

namespace thd::master {

namespace {

thread_local Capture* t_capture = nullptr;
// Captures open on any thread: while there are none, an op need not look up its
// thread's capture (a thread-local lookup per operand and per command).
std::atomic<int> g_open_captures{0};

// Room for the DefineGraph around a node's commands in one message.
constexpr size_t kDefineEnvelopeBytes = size_t{64} << 10;

}  // namespace

void check_not_capturing(const char* op, const char* why) {
  if (t_capture == nullptr) return;
  THD_THROW(Error, op,
            "{} inside a graph capture: {}; nothing runs while a graph is captured (as in CUDA's stream capture). "
            "End the capture first (GraphCapture::end, or leave thd::capture's callable), then replay the graph",
            op, why != nullptr ? why : "it is a sync point, which waits for results that do not exist yet");
}

Capture::Capture(std::shared_ptr<Session> session) : session_(std::move(session)), slot_(&t_capture) {
  if (t_capture != nullptr) {
    THD_THROW(ValueError, "GraphCapture", "this thread is capturing a graph already (captures do not nest)");
  }
  g_open_captures.fetch_add(1);
  t_capture = this;
}

void Capture::close_slot() {
  if (*slot_ != this) return;
  *slot_ = nullptr;
  g_open_captures.fetch_sub(1);
}

Capture::~Capture() {
  close_slot();
  if (!ended_) discard();
}

Capture* Capture::active() {
  // This thread's own open capture counts: its count is never 0 to this thread.
  return g_open_captures.load(std::memory_order_relaxed) == 0 ? nullptr : t_capture;
}

bool Capture::takes(fb::Op type) {
  switch (protocol::in_graph(type)) {
    case protocol::InGraph::Held:
      return true;
    case protocol::InGraph::SentAtOnce:
      return false;
    case protocol::InGraph::Refused:
      check_not_capturing(fb::EnumNameOp(type), "a graph cannot hold it");
      return false;
  }
  return false;
}

uint64_t Capture::record(NodeLink& link, uint32_t stream, fb::Op type, const NodeLink::BuildOp& build) {
  if (&session_->link(link.node(), "capture") != &link) {
    THD_THROW(ValueError, "capture", "an op of another master-worker session was issued inside a graph capture");
  }
  link.throw_if_lost();
  NodePart& part = parts_[link.node()];
  const uint64_t id = session_->next_op_id();
  const auto table = build(part.builder);
  part.commands.push_back(fb::CreateCommand(part.builder, id, type, table, stream));
  return id;
}

void Capture::own(const std::shared_ptr<Handle>& handle) {
  parts_[handle->node].owned.push_back(handle->id);
  owned_.push_back(handle);
}

void Capture::use(const std::shared_ptr<Handle>& handle) { used_.try_emplace(handle->id, handle); }

void Capture::drop_parts(uint64_t graph, const std::vector<Session::GraphPart>& parts) {
  for (const auto& part : parts) {
    try {
      session_->link(part.node, "GraphCapture::end").append_on(0, fb::Op::DropGraph, [&](NodeLink::Builder& b) {
        return fb::CreateDropGraph(b, graph).Union();
      });
    } catch (const PeerLost&) {  // a lost node has nothing left to drop
    }
  }
}

void Capture::throw_refused(uint64_t graph, const std::vector<Session::GraphRefusal>& refused,
                            const std::vector<int>& defined) {
  // A refusing node poisoned the tensors its part would have made (a get of one
  // raises the refusal): they are freed as any handle's. The other nodes never made
  // theirs, which discard() marks.
  auto refused_on = [&](int node) {
    return std::any_of(refused.begin(), refused.end(), [&](const auto& r) { return r.node == node; });
  };
  std::erase_if(owned_, [&](const std::shared_ptr<Handle>& h) { return refused_on(h->node); });
  std::string causes;
  for (const auto& r : refused) {
    causes += fmt::format("{}node {} refused its part (op {}): {}", causes.empty() ? "" : "; ", r.node, r.op_id,
                          r.message);
  }
  const std::string dropped =
      defined.empty() ? std::string("no node defined it")
                      : fmt::format("it was dropped on node{} {}, which had defined it", defined.size() > 1 ? "s" : "",
                                    fmt::join(defined, ", "));
  const auto& first = refused.front();
  std::rethrow_exception(make_remote_error(
      protocol::from_fb(first.kind),
      fmt::format("graph {} could not be defined: {}. No replay of it can run: {}", graph, causes, dropped),
      ErrorContext{.op = "GraphCapture::end", .rank = 0, .node = first.node, .peer = first.node + 1}, first.op_id));
}

void Capture::discard() {
  for (const auto& h : owned_) h->never_made.store(true);
  owned_.clear();
  used_.clear();
  parts_.clear();
}

Graph Capture::end() {
  if (ended_) THD_THROW(ValueError, "GraphCapture::end", "the capture has ended already");
  ended_ = true;
  close_slot();
  auto state = std::make_shared<GraphState>();
  try {
    state->session = session_;
    state->id = session_->next_graph_id();
    std::vector<std::pair<int, std::vector<uint8_t>>> messages;
    for (auto& [node, part] : parts_) {
      if (part.commands.empty()) continue;  // only tensors' metadata was asked for there
      auto& b = part.builder;
      const auto batch = fb::CreateCommandBatch(b, 0, false, b.CreateVector(part.commands));
      b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::CommandBatch, batch.Union()));
      // The worker refuses a batch of more commands (protocol::verify_message).
      if (part.commands.size() > protocol::kMaxCommandsPerBatch) {
        THD_THROW(ValueError, "GraphCapture::end",
                  "the graph holds {} commands on node {}, past the protocol's limit of {} commands per batch: capture "
                  "fewer ops per graph",
                  part.commands.size(), node, protocol::kMaxCommandsPerBatch);
      }
      if (b.GetSize() + kDefineEnvelopeBytes + part.owned.size() * 8 > protocol::kMaxMessageBytes) {
        THD_THROW(ValueError, "GraphCapture::end",
                  "the graph's {} commands on node {} take {} bytes, past the protocol's message limit of {} bytes: "
                  "capture fewer ops per graph",
                  part.commands.size(), node, b.GetSize(), protocol::kMaxMessageBytes);
      }
      state->num_ops += part.commands.size();
      messages.emplace_back(node, std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()));
    }
    std::vector<Session::GraphPart> graph_parts;
    for (const auto& [node, bytes] : messages) graph_parts.push_back({node, &bytes, &parts_[node].owned});
    std::vector<Session::GraphRefusal> refused;
    try {
      refused = session_->define_graph(state->id, graph_parts);
    } catch (...) {
      drop_parts(state->id, graph_parts);
      throw;
    }
    if (!refused.empty()) {
      drop_parts(state->id, graph_parts);
      std::vector<int> defined;
      for (const auto& part : graph_parts) {
        if (std::none_of(refused.begin(), refused.end(), [&](const auto& r) { return r.node == part.node; })) {
          defined.push_back(part.node);
        }
      }
      throw_refused(state->id, refused, defined);
    }
    for (const auto& part : graph_parts) state->nodes.push_back(part.node);
  } catch (...) {
    discard();
    state->reset_done = true;  // nothing left to drop on the nodes
    throw;
  }
  state->owned = std::move(owned_);
  state->used.reserve(used_.size());
  for (auto& [id, h] : used_) state->used.push_back(std::move(h));
  used_.clear();
  parts_.clear();
  return Graph(std::move(state));
}

GraphState::~GraphState() {
  try {
    reset();
  } catch (...) {  // a destructor must not throw; the session frees everything at its end
  }
}

void GraphState::replay() {
  constexpr const char* kOp = "Graph::replay";
  check_not_capturing(kOp, "a graph does not hold replays of graphs");
  std::lock_guard lock(mu);
  if (reset_done) THD_THROW(ValueError, kOp, "graph {} was reset: capture it again", id);
  auto s = session.lock();
  if (!s) {
    THD_THROW(ValueError, kOp, "graph {} belongs to a master-worker session that has ended (thd::shutdown)", id);
  }
  if (current_session(kOp) != s) {
    THD_THROW(ValueError, kOp, "graph {} was captured in another master-worker session: a graph runs only in the "
              "session that captured it", id);
  }
  const uint64_t replay = replays.load() + 1;
  // Several nodes: under the cross-node lock, as every op that commands several
  // nodes, so the collectives and copies inside reach every member in one order.
  // The parts wait in the nodes' buffers like any op (back-to-back replays go out
  // in one batch per node), entangled: a node may block in the graph on another (a
  // copy's receive, a collective, a remote event), so whenever one of these
  // buffers is sent, the others are sent with it (NodeLink::append_on).
  std::unique_lock<std::mutex> cross;
  const bool spans_nodes = nodes.size() > 1;
  if (spans_nodes) cross = std::unique_lock(s->cross_node_mutex());
  for (int node : nodes) {
    s->link(node, kOp).append_on(
        0, fb::Op::ReplayGraph, [&](NodeLink::Builder& b) { return fb::CreateReplayGraph(b, id, replay).Union(); },
        spans_nodes);
  }
  replays.store(replay);
}

void GraphState::reset() {
  std::vector<std::shared_ptr<Handle>> dropped_owned, dropped_used;
  {
    std::lock_guard lock(mu);
    if (reset_done) return;
    reset_done = true;
    dropped_owned.swap(owned);
    dropped_used.swap(used);
    // The graph's tensors are made by its replays: without one there is nothing on
    // the nodes to free.
    if (replays.load() == 0) {
      for (const auto& h : dropped_owned) h->never_made.store(true);
    }
  }
  if (auto s = session.lock()) {
    for (int node : nodes) {
      try {
        s->link(node, "Graph::reset").append_on(0, fb::Op::DropGraph, [&](NodeLink::Builder& b) {
          return fb::CreateDropGraph(b, id).Union();
        });
      } catch (const PeerLost&) {  // a lost node has nothing left to drop
      }
    }
  }
  // The handles go here: the frees of the graph's tensors follow the DropGraph.
}

size_t GraphState::memory_bytes(int node) const {
  std::lock_guard lock(mu);
  // The storages of tensors from outside (inputs, and views of them the graph made)
  // are not the graph's.
  std::set<uint64_t> own_ids;
  for (const auto& h : owned) own_ids.insert(h->id);
  std::set<const StorageImpl*> outside, counted;
  for (const auto& h : used) {
    if (h->node == node && own_ids.count(h->id) == 0) outside.insert(h->meta().storage().get());
  }
  size_t bytes = 0;
  for (const auto& h : owned) {
    if (h->node != node) continue;
    const StorageImpl* st = h->meta().storage().get();
    if (outside.count(st) != 0 || !counted.insert(st).second) continue;
    bytes += st->nbytes();
  }
  return bytes;
}

}  // namespace thd::master

namespace thd {

master::GraphState& Graph::state(const char* op) const {
  if (!state_) {
    if (reset_id_ != 0) THD_THROW(ValueError, op, "graph {} was reset: capture it again", reset_id_);
    THD_THROW(ValueError, op, "the graph is empty (default-constructed): capture one with thd::capture");
  }
  return *state_;
}

void Graph::replay() { state("Graph::replay").replay(); }
uint64_t Graph::id() const { return state("Graph::id").id; }
uint64_t Graph::replays() const { return state("Graph::replays").replays.load(); }
std::vector<int> Graph::nodes() const { return state("Graph::nodes").nodes; }
size_t Graph::num_ops() const { return state("Graph::num_ops").num_ops; }
size_t Graph::memory_bytes(int node) const { return state("Graph::memory_bytes").memory_bytes(node); }

void Graph::reset() {
  if (!state_) return;
  state_->reset();
  reset_id_ = state_->id;
  state_.reset();
}

GraphCapture::GraphCapture()
    : capture_(std::make_unique<master::Capture>(master::current_session("GraphCapture"))) {}

GraphCapture::~GraphCapture() = default;

Graph GraphCapture::end() {
  if (!capture_) THD_THROW(ValueError, "GraphCapture::end", "the capture has ended already");
  Graph g = capture_->end();
  capture_.reset();
  return g;
}

bool is_capturing() { return master::Capture::active() != nullptr; }

}  // namespace thd
