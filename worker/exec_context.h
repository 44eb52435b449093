// What a worker's ops run against: the session's handle table, the channel, the
// node's generator and groups, and the bookkeeping that turns a failing op into
// poisoned outputs and an error reply instead of a dead worker.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <thd/datachannel.h>
#include <thd/generator.h>

#include "protocol/codec.h"
#include "worker/handle_table.h"

namespace thd::worker {

// Thrown by ExecContext::input() for a poisoned input: the op does not run and its
// outputs carry the same poison.
struct PoisonedInput {
  std::shared_ptr<const Poison> poison;
};

class ExecContext {
 public:
  explicit ExecContext(std::shared_ptr<DataChannel> channel);

  int node() const { return node_; }
  DataChannel& channel() { return *channel_; }
  HandleTable& table() { return table_; }
  Generator& generator() { return generator_; }
  std::chrono::milliseconds timeout() const { return channel_->timeout(); }

  // ---- one command -------------------------------------------------------------------
  void begin(const protocol::fb::Command& command);
  uint64_t op_id() const { return op_id_; }
  // Built only when needed (errors): most ops never ask.
  std::string op_name() const { return command_ != nullptr ? protocol::op_name(*command_) : "op"; }
  // Declares a new tensor the op makes: ValueError (before anything runs) when the
  // id is 0 or already live; poisoned when the op fails.
  void fresh(uint64_t id);
  // Declares a live tensor the op writes in place: poisoned when the op fails.
  void target(uint64_t id);
  // fresh(out), or target(inplace) for the in-place form (out == 0).
  void output(uint64_t out, uint64_t inplace) { out != 0 ? fresh(out) : target(inplace); }
  // A live input: ValueError for an unknown id, PoisonedInput for a poisoned one.
  const Tensor& input(uint64_t id);
  // The op's new tensor `id`.
  void define(uint64_t id, Tensor tensor);
  // The op failed: poison every declared output with `poison` (an inherited one, or
  // a new one, which is also reported to the master).
  void fail(std::shared_ptr<const Poison> poison, bool report);
  std::shared_ptr<const Poison> new_poison(const std::string& message) const;

  // ---- session state -------------------------------------------------------------------
  // The group of `nodes` (in that order), made on first use and cached.
  DataChannel& group(const std::vector<int>& nodes);
  // Receives posted for this batch's uploads, in Upload order.
  std::unordered_map<uint64_t, std::pair<Tensor, Request>>& uploads() { return uploads_; }
  // Sends a reply (a finished Message) to the master on the reply tag.
  void reply(std::span<const uint8_t> message);
  // Replies sent so far this session (a SyncDone tells the master how many to expect).
  uint64_t replies_sent() const { return replies_sent_; }

 private:
  std::shared_ptr<DataChannel> channel_;
  int node_;
  HandleTable table_;
  Generator generator_;
  std::map<std::vector<int>, std::shared_ptr<DataChannel>> groups_;
  std::unordered_map<uint64_t, std::pair<Tensor, Request>> uploads_;

  uint64_t replies_sent_ = 0;

  uint64_t op_id_ = 0;
  const protocol::fb::Command* command_ = nullptr;
  std::vector<uint64_t> outputs_;
};

}  // namespace thd::worker
