// What a worker's ops run against: the session (handle table, channel, groups,
// streams, events) and, per stream, the op being run, the stream's generator and
// its error state; the bookkeeping that turns a failing op into poisoned outputs and
// an error reply instead of a dead worker. One ExecContext per stream: the default
// stream's is used by the command loop, each other stream's by its executor.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <thd/datachannel.h>
#include <thd/generator.h>

#include "protocol/codec.h"
#include "streams/hazard_checker.h"
#include "worker/gpu_streams.h"
#include "worker/handle_table.h"

namespace thd::worker {

class Session;
class EventState;
struct GraphRun;

// Thrown by ExecContext::input() for a poisoned input: the op does not run and its
// outputs carry the same poison.
struct PoisonedInput {
  std::shared_ptr<const Poison> poison;
};

// What the command loop worked out for a command when it read it, for the stream
// that runs it later (the record an event wait refers to, a collective's turn).
struct Prepared {
  uint64_t value = 0;
  std::shared_ptr<EventState> event;
  // The replay of a graph the command runs in (worker/graphs.h), null for a command
  // the master sent on its own. Kept alive by the message holder of the command.
  const GraphRun* graph = nullptr;
  // The command's index in that graph's commands.
  uint32_t index = 0;
};

class ExecContext {
 public:
  ExecContext(Session& session, uint32_t stream);

  Session& session() { return session_; }
  int node() const;
  uint32_t stream() const { return stream_; }
  DataChannel& channel();
  HandleTable& table();
  Generator& generator() { return generator_; }
  // The CUDA streams its ops on GPU tensors run on (worker/gpu_streams.h).
  GpuStreams& gpu() { return gpu_; }
  std::chrono::milliseconds timeout() const;

  // ---- one command -------------------------------------------------------------------
  void begin(const protocol::fb::Command& command, Prepared prepared = {});
  uint64_t op_id() const { return op_id_; }
  const Prepared& prepared() const { return prepared_; }
  // Built only when needed (errors): most ops never ask.
  std::string op_name() const { return command_ != nullptr ? protocol::op_name(*command_) : "op"; }
  // Declares a new tensor the op makes: ValueError (before anything runs) when the
  // id is 0 or already live (unless the op runs in a replay of a graph that owns the
  // id: each replay defines it anew); poisoned when the op fails.
  void fresh(uint64_t id);
  // Declares a live tensor the op writes in place: poisoned when the op fails.
  void target(uint64_t id);
  // fresh(out), or target(inplace) for the in-place form (out == 0).
  void output(uint64_t out, uint64_t inplace) { out != 0 ? fresh(out) : target(inplace); }
  // A live input: ValueError for an unknown id, PoisonedInput for a poisoned one
  // (or any input while the stream carries an inherited failure).
  const Tensor& input(uint64_t id);
  // In a replay of a graph that owns `id` (declared with fresh()): the tensor the
  // previous replay left there, when the op may write its new result into it
  // instead of making a new one (docs/graphs.md, "Memory"): defined and not
  // poisoned. Views of it see the new values, as views of the graph's tensor; the op
  // writes it only when it shares no storage with the op's inputs (tensor/into*.h).
  // Null otherwise, and while the stream carries an inherited failure or the hazard
  // checker is on (it follows each definition): the op then makes and defines its
  // result as usual.
  const Tensor* reusable(uint64_t id);
  // The op's new tensor `id` (PoisonedInput while the stream carries a failure).
  void define(uint64_t id, Tensor tensor);
  // Before the op allocates `bytes` of tensors: ValueError when that would take the
  // node past the session's memory limit (SessionLimits). An op allocates on its
  // inputs' device: that of the first input it read (the CPU if none), unless named.
  void reserve(uint64_t bytes) const { reserve(bytes, op_device_); }
  void reserve(uint64_t bytes, Device device) const;
  // A view the op made: ValueError when its extent (elements times their size) is
  // past that limit, so no later op walks or copies more than the node could hold.
  void check_view(const Tensor& view) const;
  // The op failed: poison every declared output with `poison` (an inherited one, or
  // a new one, which is also reported to the master).
  void fail(std::shared_ptr<const Poison> poison, bool report);
  // A failure of work the stream ran outside any command (a batch's frees): the
  // stream's first error, reported, as a failed command's would be; it has no outputs.
  void fail_outside_command(std::shared_ptr<const Poison> poison);
  std::shared_ptr<const Poison> new_poison(const std::string& message, ErrorKind kind) const;
  // The poison an op reading `entry` takes: the entry's own, else the stream's
  // inherited one; null when neither.
  std::shared_ptr<const Poison> poison_of(const Entry* entry) const;

  // ---- the stream's error state (docs/streams.md, "Errors") ----------------------------
  // The first failure on this stream since the last synchronize(): what an event
  // recorded here carries.
  std::shared_ptr<const Poison> first_error() const { return first_error_; }
  // A failure that reached this stream through an event wait: every later op on it
  // is poisoned with it until synchronize().
  void inherit(std::shared_ptr<const Poison> poison);
  std::shared_ptr<const Poison> inherited() const { return inherited_; }
  void clear_errors();

  // ---- session state -------------------------------------------------------------------
  DataChannel& group(const std::vector<int>& nodes);
  void reply(std::span<const uint8_t> message);
  uint64_t replies_sent() const;

 private:
  Session& session_;
  const uint32_t stream_;
  Generator generator_;
  GpuStreams gpu_;
  std::shared_ptr<const Poison> first_error_;
  std::shared_ptr<const Poison> inherited_;

  uint64_t op_id_ = 0;
  Device op_device_ = Device::cpu();  // of the first input the op read
  bool op_device_known_ = false;
  const protocol::fb::Command* command_ = nullptr;
  Prepared prepared_;
  std::vector<uint64_t> outputs_;
  std::vector<streams::Access> accesses_;  // with the hazard checker on

  // The live entry `id`, through the graph's kept lookups in a replay.
  const Entry* find(uint64_t id) const;

 public:
  // What the op read and wrote through the tensors it named (hazard checker).
  const std::vector<streams::Access>& accesses() const { return accesses_; }
  // The tensors the op declared it writes (for the trace).
  const std::vector<uint64_t>& outputs() const { return outputs_; }
  // A flow arrow's end in the trace at this moment, on this stream's track (no-op
  // when not tracing).
  void flow(uint64_t id, bool begin);
};

}  // namespace thd::worker
