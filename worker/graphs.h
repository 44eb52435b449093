// A worker's graphs of one session (docs/graphs.md): this node's part of each
// graph the master captured, verified once when its DefineGraph is read and kept
// until its DropGraph or the session's end. A ReplayGraph hands the kept commands
// to the command loop's scheduling again, as if the master had just sent them: no
// receive, no verification, no decoding of a new message per replay.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <thd/datachannel.h>

#include "protocol/codec.h"
#include "worker/graph_collective.h"
#include "worker/handle_table.h"
#include "worker/kept_plans.h"

namespace thd::worker {

class GraphDef {
 public:
  // Copies `message` (a whole Message of this protocol version holding a
  // CommandBatch) into memory of its own and verifies it: ProtocolError naming what
  // was wrong for bytes that are not such a message, or that hold a command a graph
  // cannot hold (a sync point, an upload, a control command, another graph).
  GraphDef(uint64_t id, std::span<const uint8_t> message, std::vector<uint64_t> owned);

  uint64_t id() const { return id_; }
  // Whether the graph's ops create tensor `id` (each replay defines it anew).
  bool owns(uint64_t tensor) const { return owned_.count(tensor) != 0; }
  const std::vector<uint64_t>& owned() const { return owned_list_; }
  // The commands, in issue order; they point into message().
  const std::vector<const protocol::fb::Command*>& commands() const { return commands_; }
  const Message& message() const { return message_; }
  // Every command runs on the node's default stream.
  bool default_stream_only() const { return default_stream_only_; }

  // The live entry `id` of `table` for command `index` of the graph (nullptr when
  // not live). A replay's command looks each of its tensors up in the handle table
  // once, and later replays use the entry's address as long as the table erased
  // nothing meanwhile. Only the stream that runs command `index` calls this for it
  // (a command always runs on its stream, one replay after the other), so the kept
  // lookups take no lock.
  const Entry* lookup(size_t index, uint64_t id, const HandleTable& table) const;
  // owns(tensor) for an output of command `index`, kept with its lookups (the
  // same stream-only use): a replay's op asks it without a hash lookup.
  bool owns(size_t index, uint64_t tensor) const;
  // What the members settled about collective `index` (worker/graph_collective.h).
  // Only the stream that runs the command uses it, one replay after the other, as
  // the kept lookups.
  SettledCollective& settled(size_t index) const { return settled_[index]; }
  // The plans its elementwise commands kept (worker/kept_plans.h). Only the command
  // loop uses them, for a replay of a graph whose commands all run on the default
  // stream (it runs those itself, one replay after the other).
  KeptPlans& plans() const { return plans_; }

 private:
  // The lookups of one command: the few tensors it names.
  struct Lookups {
    static constexpr size_t kMax = 4;
    uint64_t erasures = 0;  // the table's count when they were made
    uint8_t size = 0;
    std::array<uint64_t, kMax> ids{};
    std::array<const Entry*, kMax> entries{};
    // Outputs of the command that the graph owns.
    uint8_t made = 0;
    std::array<uint64_t, 2> made_ids{};
  };
  mutable std::vector<Lookups> lookups_;
  mutable std::vector<SettledCollective> settled_;
  mutable KeptPlans plans_{0};

  uint64_t id_;
  Message message_;
  std::vector<const protocol::fb::Command*> commands_;
  bool default_stream_only_ = true;
  std::vector<uint64_t> owned_list_;
  std::unordered_set<uint64_t> owned_;
};

// One replay of a graph: what its failing ops' reports name. Every command of the
// replay is scheduled with a message holder that keeps this (and the graph) alive
// until the stream that runs it is done with it.
struct GraphRun {
  std::shared_ptr<const GraphDef> graph;
  uint64_t replay = 0;
};

// Whether a graph may hold a command of this op: the ops that run in a stream's
// order. Sync points, uploads, control commands and graph commands may not.
bool graph_may_hold(protocol::fb::Op op);

// The graphs of a session by id. Used by the command loop only (DefineGraph,
// ReplayGraph and DropGraph all run there), so it takes no lock.
class GraphTable {
 public:
  // ValueError when the id is 0 or in use.
  void define(std::shared_ptr<const GraphDef> graph);
  // A definition that was refused: its replays do nothing (the refusal poisoned the
  // graph's tensors and was reported once). ValueError as define.
  void define_refused(uint64_t id);
  struct Found {
    bool known = false;                     // defined, or refused
    std::shared_ptr<const GraphDef> graph;  // null for a refused one
  };
  Found find(uint64_t id) const;
  // False when the id was not defined.
  bool erase(uint64_t id);
  size_t size() const { return graphs_.size(); }
  // Why tensor `id` is not in node `node`'s handle table, for an error message: made
  // by a graph that has not run yet, or never created or already freed.
  std::string not_live(uint64_t id, int node) const;

 private:
  void check_new(uint64_t id) const;
  std::unordered_map<uint64_t, std::shared_ptr<const GraphDef>> graphs_;  // null: refused
};

}  // namespace thd::worker
