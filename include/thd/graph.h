// Graphs (docs/graphs.md): a sequence of ops on the workers, captured once and
// replayed with one small command per node, after CUDA Graphs.
//
//   thd::Graph g = thd::capture([&] {      // nothing runs during the capture
//     y.copy_(x * w + b);                  // x, w, b, y made before: inputs and outputs
//   });
//   for (...) { x.copy_(batch); g.replay(); }  // asynchronous, in order with other ops
//
// What the program issues on this thread while a capture is open is recorded
// instead of sent: ops on any node and stream. Tensors created inside belong to
// the graph: their handles stay valid, and after a replay hold what that replay
// computed. Tensors from outside are used by handle: updated in place between
// replays (copy_, fill_, ...), the next replay sees the new values. A sync point
// (get, item, synchronize, an event or stream query, stats) inside a capture is an
// error at its call site: nothing has run, so there is nothing to wait for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace thd {

namespace master {
class Capture;
struct GraphState;
}  // namespace master

class Graph {
 public:
  // An empty graph (defined() is false); replay() on it is a ValueError.
  Graph() = default;
  // For the runtime.
  explicit Graph(std::shared_ptr<master::GraphState> state) : state_(std::move(state)) {}

  bool defined() const { return state_ != nullptr; }
  // Runs the graph once more on every node it spans: one ReplayGraph command per
  // node, asynchronous like any op (returns at once), in order with the ops issued
  // before and after it on this thread. ValueError for an empty or reset graph, a
  // graph of a session that has ended or of another session, or a replay inside a
  // capture.
  void replay();
  // The graph's id in its session (from 1).
  uint64_t id() const;
  // Replays issued so far.
  uint64_t replays() const;
  // The nodes the graph runs on, ascending.
  std::vector<int> nodes() const;
  // Commands captured, on every node.
  size_t num_ops() const;
  // Bytes of tensor memory the graph's own tensors hold on `node` once replayed
  // (each storage once: views share their base's); 0 for a node it does not use.
  size_t memory_bytes(int node) const;
  // Frees the graph's tensors (lazily, as for released handles) and forgets its
  // commands on every node; replays already issued still run. This copy is empty
  // afterwards, and replay() on any other copy a ValueError. Destroying the last
  // copy does the same.
  void reset();

 private:
  master::GraphState& state(const char* op) const;

  std::shared_ptr<master::GraphState> state_;
  uint64_t reset_id_ = 0;  // the id this graph had before reset(), for the error of a later use
};

// Captures what this thread issues between its construction and end() (RAII).
// Destroyed without end() (an exception left the capture), it discards the
// capture: nothing was sent, and the tensors created inside are never made.
class GraphCapture {
 public:
  // ValueError when this thread is capturing already, or without a session.
  GraphCapture();
  ~GraphCapture();
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;

  // Ends the capture: each node the ops went to gets the graph's commands once
  // (verified there once), and the graph is returned, not yet run, once every node
  // has accepted its part (one round trip to the nodes together). ValueError when
  // called twice, or when a node's part of the graph exceeds the protocol's message
  // limit (64 MiB of commands) or its limit of commands per batch. RemoteError
  // naming the graph, the node and the cause when a node refuses its part: the
  // parts the other nodes defined are dropped, and no graph is made.
  Graph end();

 private:
  std::unique_ptr<master::Capture> capture_;
};

// thd::capture([&] { ... }): the RAII form around a callable.
template <typename F>
Graph capture(F&& f) {
  GraphCapture capture;
  std::forward<F>(f)();
  return capture.end();
}

// Whether this thread is capturing a graph.
bool is_capturing();

}  // namespace thd
