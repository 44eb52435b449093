// The master's side of graphs (include/thd/graph.h, docs/graphs.md): the capture
// open on a thread, which records the commands its ops append instead of sending
// them, and a captured graph's state.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <thd/graph.h>

#include "master/handle.h"
#include "master/node_link.h"
#include "master/session.h"

namespace thd::master {

// Error naming `op`, a call that cannot be made while this thread captures a graph,
// and `why`. Throws only while capturing.
void check_not_capturing(const char* op, const char* why = nullptr);

class Capture {
 public:
  // Opens a capture on this thread (ValueError when one is open already).
  explicit Capture(std::shared_ptr<Session> session);
  // Closes the capture; without end(), discards it.
  ~Capture();
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // This thread's open capture, null when none.
  static Capture* active();
  // Whether a command of `type` goes into the capture: the commands that run in a
  // stream's order do. Stream and event lifetimes (create, destroy) are sent at
  // once; a query or sync point is an Error naming it.
  static bool takes(fb::Op type);

  // Records a command for `link`'s node on `stream` in place of sending it;
  // returns its op id.
  uint64_t record(NodeLink& link, uint32_t stream, fb::Op type, const NodeLink::BuildOp& build);
  // A tensor a captured op creates: the graph owns it.
  void own(const std::shared_ptr<Handle>& handle);
  // A tensor a captured op names: kept alive as long as the graph is.
  void use(const std::shared_ptr<Handle>& handle);
  Session& session() { return *session_; }

  Graph end();

 private:
  struct NodePart {
    flatbuffers::FlatBufferBuilder builder{16 << 10};
    std::vector<flatbuffers::Offset<fb::Command>> commands;
    std::vector<uint64_t> owned;
  };
  // Clears the capturing thread's slot, if it still holds this capture.
  void close_slot();
  // The capture is over without a graph: its tensors are never made.
  void discard();
  // A DropGraph of `graph` to each node of `parts` (a lost one skipped).
  void drop_parts(uint64_t graph, const std::vector<Session::GraphPart>& parts);
  // The RemoteError of a graph some nodes refused (`defined`: the others), naming
  // the graph, each refusing node and its cause.
  [[noreturn]] void throw_refused(uint64_t graph, const std::vector<Session::GraphRefusal>& refused,
                                  const std::vector<int>& defined);

  std::shared_ptr<Session> session_;
  // The capturing thread's slot (its thread-local pointer to its capture), cleared
  // through this even when the capture ends or goes on another thread.
  Capture** slot_;
  std::map<int, NodePart> parts_;
  std::vector<std::shared_ptr<Handle>> owned_;
  std::unordered_map<uint64_t, std::shared_ptr<Handle>> used_;
  bool ended_ = false;
};

struct GraphState {
  ~GraphState();
  void replay();
  void reset();
  size_t memory_bytes(int node) const;

  std::weak_ptr<Session> session;
  uint64_t id = 0;
  std::vector<int> nodes;
  size_t num_ops = 0;
  std::atomic<uint64_t> replays{0};

  mutable std::mutex mu;  // below; held while a replay is issued, so replays go in number order
  bool reset_done = false;
  std::vector<std::shared_ptr<Handle>> owned;
  std::vector<std::shared_ptr<Handle>> used;
};

}  // namespace thd::master
