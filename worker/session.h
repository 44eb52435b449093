// One master session on a worker node: what the node's streams share (the handle
// table, the channel, the uploads in flight, the reply stream to the master, the
// groups of collectives and their turns, the streams and the events).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include <thd/datachannel.h>
#include <thd/memory.h>

#include "protocol/framing.h"
#include "streams/trace.h"
#include "tensor/cpu_allocator.h"
#include "worker/events.h"
#include "worker/exec_context.h"
#include "worker/graphs.h"
#include "worker/handle_table.h"
#include "worker/notice_board.h"
#include "worker/progress_reporter.h"
#include "worker/stream_check.h"
#include "worker/streams.h"
#include "worker/worker.h"

namespace thd::worker {

class Session {
 public:
  explicit Session(std::shared_ptr<DataChannel> channel, const SessionLimits& limits = {});
  // Streams end first (their queued ops see stopping() and are dropped; the one
  // running finishes), then everything else.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int node() const { return node_; }
  DataChannel& channel() { return *channel_; }
  std::chrono::milliseconds timeout() const { return channel_->timeout(); }
  HandleTable& table() { return table_; }
  StreamSet& streams() { return streams_; }
  EventTable& events() { return events_; }
  // The session's graphs (the command loop's alone).
  GraphTable& graphs() { return graphs_; }

  // ---- memory (SessionLimits) -------------------------------------------------------------
  // Out of memory naming `op` (HostOutOfMemoryError for the CPU, OutOfMemoryError
  // for a GPU) unless `bytes` more of tensor memory on `device` keep it within the
  // session's limit: called before an op allocates. A device this node does not
  // have is a ValueError (check_device).
  void reserve(uint64_t bytes, const std::string& op, Device device = Device::cpu());
  // Whether `bytes` more of host tensor memory keep the node within its limit
  // (reserve's check for the CPU, without naming an op: an op's name is built only
  // for the error).
  bool host_fits(uint64_t bytes) const {
    const auto in_use = static_cast<uint64_t>(std::max<int64_t>(detail::CpuAllocator::instance().allocated_bytes(), 0));
    return bytes <= memory_limit_ && in_use <= memory_limit_ - bytes;
  }
  // ValueError naming `op` unless a view of `bytes` (elements times their size, not
  // memory) on `device` is within that device's limit.
  void check_extent(uint64_t bytes, const std::string& op, Device device = Device::cpu());
  size_t memory_limit() const { return memory_limit_; }
  // The limit of tensor memory on `device` (the CPU: memory_limit()).
  size_t memory_limit(Device device);

  // ---- uploads: the receive posted when the batch was read, taken by its Upload --------
  void post_upload(uint64_t id, Tensor tensor, Request receive);
  std::optional<std::pair<Tensor, Request>> take_upload(uint64_t id);

  // ---- replies to the master (thread-safe, counted) -------------------------------------
  void reply(std::span<const uint8_t> message);
  uint64_t replies_sent() const { return replies_sent_.load(); }

  // ---- collectives -------------------------------------------------------------------------
  // A collective's turn, in the order the command loop read them: the members of a
  // group call into the DataChannel in one order whatever streams run them.
  uint64_t next_collective_turn() { return next_turn_++; }
  // Blocks until `turn` is due; TimeoutError at the session's timeout.
  void await_turn(uint64_t turn, const char* op);
  void end_turn(uint64_t turn);
  // The group of `nodes` (in that order), made on first use and cached; called in turn.
  DataChannel& group(const std::vector<int>& nodes);

  // ---- generators ----------------------------------------------------------------------
  // Seeds every stream's generator from the session's seed (ManualSeed, Hello).
  void seed_all(uint64_t seed);
  void seed_stream(ExecContext& ctx);

  // ---- event notices between nodes of this host (worker/notice_board.h) ----
  // Makes this node's board for the master's session (its Hello): before the node
  // answers the Hello, so every board of the job exists before any wait is issued.
  // Once per session: the boards stay until it ends (records not yet run hold them).
  void open_notice_board(uint64_t session_id);
  // This node's board, null when it has none.
  NoticeBoard* notice_board() { return notice_board_.get(); }
  // `node`'s board, opened on first use; null when that node runs on another host
  // (or this node has no board: a peer never rings a board nobody polls).
  NoticeBoard* peer_notice_board(int node);
  // A notice whose receive is still posted after its doorbell let the wait go on:
  // kept until the message has come, and withdrawn if the session ends first.
  void keep_late_notice(std::unique_ptr<protocol::PostedMessage> notice);

  // The hazard checker (THD_STREAM_CHECK=1); null when off.
  StreamCheck* check() { return check_.get(); }

  // ---- the trace (THD_TRACE on the master: Hello.trace) ----
  // Starts recording: this node is process node+1 of the job's trace.
  void enable_trace();
  // Null when not tracing.
  trace::Recorder* recorder() { return recorder_.get(); }
  int32_t trace_pid() const { return node_ + 1; }

  // ---- test support (THD_TEST_HOOKS=1 in a build with THD_ENABLE_TEST_HOOKS) ----
  bool test_hooks() const { return test_hooks_; }
  // THD_TEST_HOLD_EVENT_NOTICES=K (with the hooks): this node sends the message of
  // each event notice only once latch K is open (its doorbell rings as usual), so a
  // test sees a waiter on this host go on at the bell alone. 0: no hold.
  uint64_t notice_hold_latch() const { return notice_hold_latch_; }
  // THD_TEST_REFUSE_GRAPHS=N (with the hooks): node N refuses every graph definition,
  // as it refuses a hostile one, so a test sees a graph defined on some nodes only.
  bool refuses_graphs() const { return refuses_graphs_; }
  void open_latch(uint64_t key);
  // False at the timeout or when the session ends.
  bool wait_latch(uint64_t key, std::chrono::milliseconds timeout);

  // Before a tensor is placed on `device` (CPU or GPU): check_device, and the first
  // use of a GPU in this session resets its peak memory.
  void use_device(Device device, const std::string& op);
  // The GPUs this session used (for thd::stats).
  std::vector<int> used_devices();

  // Ops run (or poisoned) this session, for thd::stats.
  void count_op() { ops_executed_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t ops_executed() const { return ops_executed_.load(std::memory_order_relaxed); }
  // After each op count_op() counted, for the master's progress reports: the ops
  // running are those counted and not yet finished.
  void op_finished() { ops_finished_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t ops_finished() const { return ops_finished_.load(std::memory_order_relaxed); }
  // Waits until every stream ran what it holds, for as long as they keep finishing
  // ops within the session's timeout (a long queue is not a stall); false once
  // they finished none in a whole timeout, or the session is ending.
  bool drain_streams();
  // Reports this node's progress to the master while it has work (from the Hello
  // on: the master's reply thread is listening by then).
  void start_progress_reports();

  // True once the session is ending: long waits give up.
  bool stopping() const { return stopping_.load(); }
  // True once the master's connection is lost (a receive posted for the whole
  // session on the reply tag, which the master never sends on, failed with it).
  // Never blocks: the command loop asks between the commands of a batch, which may
  // hold seconds of work nobody is left to use.
  bool master_lost() const { return master_watch_.test() && master_watch_.error() != nullptr; }

 private:
  std::shared_ptr<DataChannel> channel_;
  const int node_;
  const size_t memory_limit_;
  const size_t device_memory_limit_;  // 0: each GPU's own memory
  // GPUs this session has used: each one's peak is reset on its first use, so
  // thd::stats() reports this session's (a pool process serves many).
  std::mutex devices_mu_;
  std::vector<bool> devices_used_;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<StreamCheck> check_;
  std::atomic<uint64_t> ops_executed_{0};
  std::atomic<uint64_t> ops_finished_{0};
  std::unique_ptr<trace::Recorder> recorder_;
  const bool test_hooks_;
  const uint64_t notice_hold_latch_;
  const bool refuses_graphs_;
  std::mutex latch_mu_;
  std::condition_variable latch_cv_;
  std::set<uint64_t> open_latches_;
  HandleTable table_;
  EventTable events_;
  GraphTable graphs_;

  std::mutex uploads_mu_;
  std::unordered_map<uint64_t, std::pair<Tensor, Request>> uploads_;

  std::mutex reply_mu_;
  std::atomic<uint64_t> replies_sent_{0};

  uint64_t next_turn_ = 0;  // the command loop's
  std::mutex turn_mu_;
  std::condition_variable turn_cv_;
  uint64_t serving_turn_ = 0;
  std::map<std::vector<int>, std::shared_ptr<DataChannel>> groups_;

  std::atomic<uint64_t> seed_{0};
  uint64_t session_id_ = 0;
  std::unique_ptr<NoticeBoard> notice_board_;
  std::mutex notices_mu_;
  std::vector<std::optional<std::unique_ptr<NoticeBoard>>> peer_boards_;  // by node; nullopt: not looked for yet
  std::vector<std::unique_ptr<protocol::PostedMessage>> late_notices_;
  uint8_t master_watch_byte_ = 0;
  Request master_watch_;
  StreamSet streams_;  // its executors stop before the rest goes
  std::unique_ptr<ProgressReporter> progress_;  // stopped first
};

}  // namespace thd::worker
