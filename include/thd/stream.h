// Streams and events of master-worker mode (docs/streams.md), with CUDA's semantics
// across nodes:
//
//   thd::Stream s = thd::Stream::create(1);        // a stream on node 1
//   {
//     thd::StreamScope in(s);                      // ops issued here run on s (node 1)
//     b = a * 2.0f;
//   }
//   thd::Event done = s.record();                  // s's work so far
//   thd::current_stream(0).wait(done);             // node 0's stream waits for it: node 1
//                                                  // tells node 0 directly
//   done.synchronize();                            // the master waits for it
//
// Every node has a default stream (CUDA's legacy default stream: it waits for every
// other stream of its node, and they wait for it). Ops on one stream run in issue
// order; ops on different streams may overlap.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

namespace thd {

namespace master {
struct StreamHandle;
struct EventHandle;
}  // namespace master

class Event;

namespace detail {
// For benchmarks and tests: when the event's latest record ran, on its worker's
// steady clock in ns (a round trip; 0 if it has not run). Comparable across nodes
// of one host, which share the clock.
int64_t event_time_ns(const Event& event);
}  // namespace detail

class Stream {
 public:
  enum class Priority : int8_t { Normal = 0, High = 1 };

  // The default stream of the current node (NodeScope).
  Stream();
  // A new stream on the current node, or on `node`.
  static Stream create(Priority priority = Priority::Normal);
  static Stream create(int node, Priority priority = Priority::Normal);
  // The default stream of `node` (default: the current node).
  static Stream default_stream(std::optional<int> node = std::nullopt);

  int node() const;
  uint32_t id() const;  // 0: the node's default stream
  bool is_default() const { return id() == 0; }
  Priority priority() const;

  // Waits until everything issued on this stream so far has run; raises the first
  // failure on it since the last synchronize (thd::RemoteError) or WorkerLost.
  void synchronize() const;
  // True when everything issued on this stream so far has run (a round trip).
  bool query() const;
  // A new event recorded on this stream now.
  Event record() const;
  // Work issued on this stream from now on waits until `event` (its latest record)
  // has completed, on whichever node it was recorded. An event never recorded: no
  // wait (as in CUDA).
  void wait(const Event& event) const;

  friend bool operator==(const Stream& a, const Stream& b) { return a.node() == b.node() && a.id() == b.id(); }

 private:
  explicit Stream(std::shared_ptr<master::StreamHandle> handle) : handle_(std::move(handle)) {}
  friend class StreamScope;
  friend class Event;
  friend Stream current_stream(std::optional<int> node);
  std::shared_ptr<master::StreamHandle> handle_;
};

class Event {
 public:
  // enable_timing: elapsed_time() may be asked of it (torch.cuda.Event's flag).
  explicit Event(bool enable_timing = false);

  // Records the work issued so far on the current stream of the current node, or on
  // `stream`. An event belongs to the node it is first recorded on: recording it on
  // another node's stream is a ValueError.
  void record();
  void record(const Stream& stream);
  // True once its latest record has run (never recorded: true). A round trip.
  bool query() const;
  // Waits until its latest record has run; raises the failure it carries (an op
  // that failed on its stream before the record) as thd::RemoteError.
  void synchronize() const;
  // Milliseconds from this event's record to `end`'s, both timed events recorded on
  // one node and complete (ValueError otherwise: synchronize first, as CUDA's
  // cudaErrorNotReady asks).
  float elapsed_time(const Event& end) const;
  // The node it was recorded on; nullopt before its first record.
  std::optional<int> node() const;
  bool timing() const;

 private:
  friend class Stream;
  friend int64_t detail::event_time_ns(const Event& event);
  std::shared_ptr<master::EventHandle> handle_;
};

// The stream ops go to on this thread for `node` (default: the current node): the
// innermost StreamScope's stream of that node, else the node's default stream.
Stream current_stream(std::optional<int> node = std::nullopt);

// Ops issued in the scope run on `stream`, and the scope's node is the stream's node
// (as torch.cuda.stream(s) also selects s's device). RAII, nestable, per thread.
class StreamScope {
 public:
  explicit StreamScope(const Stream& stream);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  int previous_node_;
};

}  // namespace thd
