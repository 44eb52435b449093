// One master session: the channel to the workers, a NodeLink per node, the reply
// thread that reads every worker's answers, the idle flusher, and the sync points
// (fetches, synchronize) with the remote errors they raise.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <thd/distributed.h>

#include "master/handle.h"
#include "master/node_link.h"
#include "protocol/framing.h"
#include "streams/trace.h"

namespace thd::master {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<DataChannel> channel, const MasterWorkerOptions& options, std::function<void()> detach);
  ~Session();

  // HELLO with every worker, then the reply thread and the flusher.
  void start(uint64_t session_id, uint64_t seed);
  // synchronize, Goodbye to every node, threads joined, channel closed. Returns the
  // first unreported remote error (raised by the caller).
  std::exception_ptr close();

  int num_nodes() const { return static_cast<int>(links_.size()); }
  const MasterWorkerOptions& options() const { return options_; }
  DataChannel& channel() { return *channel_; }
  // The link of `node`; IndexError naming the valid range otherwise.
  NodeLink& link(int node, const char* op);

  uint64_t next_tensor_id() { return next_tensor_id_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t next_op_id() { return next_op_id_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t next_graph_id() { return next_graph_id_.fetch_add(1, std::memory_order_relaxed); }
  int64_t next_transfer_tag();
  // Ops that put commands on several nodes (to_node, collectives) issue them under
  // this lock, so every worker sees them in one global order (no deadlock between
  // blocking receives).
  std::mutex& cross_node_mutex() { return cross_node_mu_; }

  // A handle for a new remote tensor on `node`.
  std::shared_ptr<Handle> new_handle(int node, Device device, Tensor meta);
  // A handle for a new contiguous tensor whose mirror is made on first use.
  std::shared_ptr<Handle> new_handle(int node, Device device, const FreshMeta& fresh);

  // ---- streams and events (streams_api.cpp) ----
  uint64_t next_event_id() { return next_event_id_.fetch_add(1, std::memory_order_relaxed); }
  // The id of a new stream on `node`, counted among its live streams; ValueError
  // naming the limit (max_streams_per_node) when it has that many.
  uint32_t open_stream(int node);
  // A stream of `node` was destroyed (its last handle went).
  void close_stream(int node);
  struct EventReport {
    bool complete = false;
    bool recorded = false;
    int64_t time_ns = 0;         // when its latest record ran, on its node's clock
    std::exception_ptr failure;  // a RemoteError, marked raised
  };
  // The state of `event` on `node`: at once, or (wait) once its latest record ran.
  EventReport query_event(int node, uint64_t event, bool wait, const char* op);
  // Whether `stream` of `node` has run everything issued on it so far.
  bool query_stream(int node, uint32_t stream);
  // thd::stats() of one node (stats.cpp).
  NodeStats node_stats(int node);

  // ---- the trace (THD_TRACE; trace.cpp) ----
  bool tracing() const { return recorder_ != nullptr; }
  // A slice on this thread's track of the master's process (no-op when not tracing).
  void trace_slice(const char* name, int64_t start, trace::Args args);

  // Downloads a tensor (a sync point).
  Tensor fetch(const Handle& handle);
  // Every node has run everything issued so far; then raises the first unraised
  // remote error, or WorkerLost for a lost node.
  void synchronize();
  // A graph's part on one node (master/graph.cpp).
  struct GraphPart {
    int node;
    const std::vector<uint8_t>* commands;  // a whole Message holding the part's CommandBatch
    const std::vector<uint64_t>* owned;    // the tensors the part's ops create
  };
  // A node's refusal of its part of a graph: its define op's OpFailed.
  struct GraphRefusal {
    int node;
    uint64_t op_id;
    std::string message;
    protocol::fb::ErrorKind kind;
  };
  // Sends each node its part of graph `graph` (a DefineGraph) and waits for every
  // node's verdict, one round trip for all; returns the refusals, marked raised
  // (the caller raises them). WorkerLost for a node lost meanwhile, TimeoutError for
  // one that makes no progress for the session's timeout.
  std::vector<GraphRefusal> define_graph(uint64_t graph, const std::vector<GraphPart>& parts);
  // Live tensors per node, after a synchronize.
  std::vector<uint64_t> live_tensors();

 private:
  struct RemoteFailure {
    int node;
    uint64_t op_id;
    std::string op_name;
    std::string message;
    protocol::fb::ErrorKind kind;
    bool raised = false;
    uint64_t graph = 0;  // the graph and replay the op ran in (0: none)
    uint64_t replay = 0;
  };
  struct NodeState {
    uint64_t replies_handled = 0;  // by the reply thread, malformed ones included
    uint64_t live_tensors = 0;     // at the last sync
    bool hello = false;
    std::string hello_error;
  };

  // The reply thread: every node's replies, and the nodes lost meanwhile.
  void reply_loop();
  // The node a world rank is (rank - 1), -1 for the master or a rank out of range.
  int node_of_rank(int rank) const;
  // Marks every node whose rank the channel has lost (node_lost).
  void notice_lost_nodes();
  // The node is lost: its link raises WorkerLost from now on, its fetches fail,
  // and the waiters on its replies wake.
  void node_lost(int node, const std::exception& why);
  void flusher_loop();
  // From an append that made a buffer non-empty: wakes the flusher if it sleeps.
  // Sends every link whose buffer holds a part of an op across nodes
  // (NodeLink::entangled), after another link sent its batch.
  void flush_entangled();
  void wake_flusher();
  void handle_reply(int node, const fb::Message& message);
  void fail_fetches_of(int node, std::exception_ptr why);
  // graph, replay: of the graph replay the op ran in (docs/graphs.md), 0 for none.
  std::exception_ptr remote_error(int node, uint64_t op_id, const std::string& op_name, const std::string& message,
                                  protocol::fb::ErrorKind kind, uint64_t graph = 0, uint64_t replay = 0);
  // Tracing: every worker's clock offset (NTP-style, at start), and at close every
  // worker's recording merged with the master's into the trace file.
  void measure_clock_offsets();
  void write_trace();
  // Records that the failure of (node, op) was raised (by a fetch or an event).
  // `replay`: the graph replay the op ran in (an op of a graph fails once per replay).
  void mark_raised_locked(int node, uint64_t op_id, uint64_t replay = 0);
  // The first failure not yet raised, marked raised; nullptr if none.
  std::exception_ptr take_unraised_failure();
  int64_t next_fetch_tag();
  // The SyncDone of `sync_id` from `node` (0 if the node was lost meanwhile): the
  // number of replies the node sent before it.
  // `op` and `waiting_for` name the wait in its errors.
  uint64_t await_sync(int node, protocol::PostedMessage& answer, uint64_t sync_id, const char* op,
                      const std::string& waiting_for);
  // Until the reply thread has handled `count` replies of `node` (or the node is lost).
  void wait_for_replies(int node, uint64_t count, const char* op = "synchronize");

  std::shared_ptr<DataChannel> channel_;
  MasterWorkerOptions options_;
  std::function<void()> detach_;
  std::vector<std::unique_ptr<NodeLink>> links_;
  std::atomic<uint64_t> next_tensor_id_{1};
  std::atomic<uint64_t> next_op_id_{1};
  std::atomic<uint64_t> next_graph_id_{1};
  std::atomic<int64_t> next_fetch_{0};
  std::atomic<int64_t> next_transfer_{0};
  std::atomic<uint64_t> next_sync_{0};
  std::atomic<uint64_t> next_event_id_{1};
  std::vector<uint32_t> next_stream_;  // per node, under mu_
  std::vector<int> live_streams_;      // per node, under mu_
  std::optional<std::string> trace_path_;
  std::unique_ptr<trace::Recorder> recorder_;
  std::vector<int64_t> clock_offsets_;  // per node: add to its timestamps for the master's clock
  std::mutex cross_node_mu_;

  std::mutex mu_;  // everything below
  std::condition_variable cv_;
  std::vector<NodeState> nodes_;
  std::vector<RemoteFailure> failures_;
  std::set<std::tuple<int, uint64_t, uint64_t>> raised_;  // (node, op id, replay) of every failure raised
  std::map<int64_t, std::pair<int, Request>> fetches_;  // fetch tag -> (node, receive)
  // Receives of gets whose waiter was interrupted (thd/interrupt.h) while the node
  // kept working: left posted, so that the node's send of the tensor finishes when
  // it comes (a cancelled receive would leave a large send pending until its
  // deadline, and the node's stream failed); dropped once finished.
  std::vector<Request> abandoned_fetches_;

  std::thread replies_;
  std::atomic<bool> stopping_{false};
  std::thread flusher_;
  std::mutex flusher_mu_;
  std::condition_variable flusher_cv_;
  std::atomic<bool> flusher_asleep_{false};
  bool closed_ = false;
};

// The session of this process, or ValueError telling the caller to init first.
std::shared_ptr<Session> current_session(const char* op);
void set_current_session(std::shared_ptr<Session> session);
bool has_current_session();
// Ends this process's claim on the session and returns it (nullptr if none).
std::shared_ptr<Session> take_current_session();

}  // namespace thd::master
