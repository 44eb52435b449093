// The master's link to one worker node: its command buffer (a FlatBuffers
// CommandBatch being built), the uploads that follow it, the frees queued by
// released handles, and the credits that bound what is in flight.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <vector>

#include <thd/datachannel.h>
#include <thd/distributed.h>

#include "protocol/codec.h"
#include "protocol/command_writer.h"

namespace thd::master {

namespace fb = protocol::fb;

// The WorkerLost error of `node`, caused by `why` (a PeerLost).
std::exception_ptr worker_lost(int node, const std::exception& why);

class NodeLink {
 public:
  using Clock = std::chrono::steady_clock;
  using Builder = flatbuffers::FlatBufferBuilder;
  // Builds one op's table in the batch's builder; returns its offset.
  using BuildOp = std::function<flatbuffers::Offset<void>(Builder&)>;

  // on_pending: called (without any lock of the link held) when the buffer goes
  // from empty to holding something; it wakes the flusher if it sleeps.
  // after_flush: called (without any lock of the link held) after this link sent a
  // batch for a reason of its own (a sync point, a full buffer, an upload): the
  // session then sends the other links' entangled parts (entangled()).
  NodeLink(std::shared_ptr<DataChannel> channel, int node, const MasterWorkerOptions& options,
           std::function<uint64_t()> next_op_id, std::function<void()> on_pending,
           std::function<void()> after_flush = [] {});

  int node() const { return node_; }
  int rank() const { return node_ + 1; }

  // Appends one command (flushing when the buffer is full); returns its op id.
  // Throws WorkerLost when the node is lost.
  // The command runs on this thread's current stream of the node (StreamScope).
  uint64_t append(fb::Op type, const BuildOp& build);
  // As append, on the given stream of the node. `entangled`: the command is one
  // part of an op that spans nodes (a graph's replay), whose other parts are
  // appended to the other nodes' links under the session's cross-node lock; it may
  // wait in the buffer like any op, but a node must never get its part without the
  // others getting theirs (it would wait in the op for them), so whenever any link
  // sends a batch, the session sends every link that holds such a part too.
  uint64_t append_on(uint32_t stream, fb::Op type, const BuildOp& build, bool entangled = false);
  // As append, for the hot elementwise ops: the command is written in one piece
  // (protocol/command_writer.h), on this thread's current stream of the node.
  uint64_t append_elementwise(const protocol::ElementwiseCommand& command);
  // As append, with a tensor whose bytes follow the batch on the upload tag.
  uint64_t append_upload(const BuildOp& build, const Tensor& contiguous);
  // Queues a Free of `id` for the next batch (never blocks, never throws). It lands
  // in the batch where it was issued: after the commands appended before it and
  // ahead of those appended after, so a tensor dropped before a new one is made is
  // freed first (the worker's memory limit counts it).
  void queue_free(uint64_t id);
  // Sends what is buffered (then, through after_flush, the other links' entangled parts).
  void flush();
  // Sends what is buffered, and nothing else.
  void flush_alone();
  // The buffer holds the part of an op that spans nodes (append_on's `entangled`).
  bool entangled() const { return entangled_.load(); }
  // Flushes, then sends a control message (Hello, Goodbye) in order after it.
  void send_control(std::span<const uint8_t> message);
  // Sends the buffer when its first command has waited for `idle`, or its first
  // queued free for kFreeIdleFactor times that (the background flusher); true if
  // it sent ops that had been waiting (not for frees alone).
  bool flush_if_idle(Clock::time_point now, std::chrono::microseconds idle);
  static constexpr int kFreeIdleFactor = 10;
  // Commands or frees wait in the buffer. Lock-free (the flusher asks while a
  // program's thread may hold the buffer for a long send); may be stale by a moment.
  bool has_pending() const;

  // From the session's reply thread.
  void on_ack(uint64_t batch_seq);
  // The node's progress report: `finished` ops so far this session, `running` now.
  void on_progress(uint64_t finished, uint32_t running);
  void on_lost(std::exception_ptr error);
  // The WorkerLost error once lost, nullptr while healthy.
  std::exception_ptr lost() const;
  void throw_if_lost() const;

  // Waits on the node run out the session's timeout counted from its last progress
  // (an ack, or a progress report whose count grew), not from their start: a slow
  // node that keeps finishing ops is waited for. What a wait that began at `since`
  // has left; zero or less: give up, with throw_no_progress.
  Clock::duration patience_left(Clock::time_point since) const;
  // TimeoutError naming `op`: the node is alive but finished nothing, or it sent
  // nothing at all, while the master waited `waiting_for` ("for tensor 3").
  [[noreturn]] void throw_no_progress(const char* op, const std::string& waiting_for, Clock::time_point since) const;

 private:
  struct QueuedFree {
    uint64_t id;
    uint64_t position;  // appended_ when it was queued
  };

  // The append of one command that write(id) puts into the buffer (under mu_).
  template <typename Write>
  uint64_t append_with(Write&& write, bool entangled);
  void flush_locked();
  // The batch's frees (CommandBatch.frees), each placed ahead of the first command
  // appended after it, and the op id they are reported under (under mu_).
  struct FreeSchedule {
    flatbuffers::Offset<flatbuffers::Vector<uint64_t>> ids;
    flatbuffers::Offset<flatbuffers::Vector<uint32_t>> before;
    uint64_t op = 0;
  };
  FreeSchedule free_schedule(const std::vector<QueuedFree>& frees);
  void acquire_credits(int64_t ops, int64_t bytes);
  [[noreturn]] void throw_no_progress_locked(const char* op, const std::string& waiting_for,
                                             Clock::time_point since) const;
  // Sends an empty batch `seq` that asks for an ack (under the link's lock).
  void request_ack(uint64_t seq);

  std::shared_ptr<DataChannel> channel_;
  std::atomic<bool> entangled_{false};  // set under mu_, cleared when the buffer is sent
  const int node_;
  const MasterWorkerOptions options_;
  std::function<uint64_t()> next_op_id_;
  std::function<void()> on_pending_;
  std::function<void()> after_flush_;

  mutable std::mutex mu_;  // the buffer; held while a batch is sent, to keep order
  Builder builder_;
  protocol::CommandWriter writer_;  // reset with the builder
  std::vector<flatbuffers::Offset<fb::Command>> commands_;
  std::vector<Tensor> uploads_;
  int64_t upload_bytes_ = 0;
  uint64_t seq_ = 0;
  Clock::time_point first_append_{};
  std::atomic<bool> pending_{false};

  // Commands appended over the link's life (under mu_); a free records it to find
  // its place in the batch.
  std::atomic<uint64_t> appended_{0};
  std::mutex free_mu_;  // frees come from any thread, also from handle destructors
  std::vector<QueuedFree> frees_;
  Clock::time_point first_free_{};

  mutable std::mutex credit_mu_;
  std::condition_variable credit_cv_;
  struct InFlight {
    uint64_t seq;
    int64_t ops;
    int64_t bytes;
    bool ack_requested;
  };
  std::deque<InFlight> in_flight_;
  int64_t ops_in_flight_ = 0;
  int64_t bytes_in_flight_ = 0;
  // Flow control waits as long as the node makes progress (an ack, or a report of
  // more ops finished), and tells a stalled node (it reports, finishing nothing)
  // from a silent one.
  Clock::time_point last_heard_{};
  Clock::time_point last_progress_{};
  uint64_t ops_finished_ = 0;
  uint32_t ops_running_ = 0;
  std::exception_ptr lost_;
  // Set once lost_ is: the healthy path of throw_if_lost takes no lock.
  std::atomic<bool> is_lost_{false};
};

}  // namespace thd::master
