// The stream hazard checker (THD_STREAM_CHECK=1): finds a tensor written on one
// stream and read or written on another with no event wait in between, like
// PyTorch's CUDA sanitizer (csan).
//
// Why vector clocks. Streams run their ops in issue order and overlap with each
// other; the only cross-stream orderings are event waits (and host syncs). Whether
// two accesses race is a question of happens-before, not of timing: on a quiet
// machine a missing wait seldom shows. So each stream carries a vector clock (for
// every stream, how many of its ops are known to come before this stream's next
// op). An op is stamped with its stream's own count; recording an event snapshots
// the clock, waiting on one merges it in. An earlier access (op n of stream S) is
// ordered before the current op exactly when the current stream's clock has
// S >= n. This judges the program, not one lucky interleaving, and it is
// transitive for free (A -> event -> B -> event -> C orders A before C), across
// nodes too: the clock travels inside the cross-node event notification
// (VectorClock::serialize/deserialize).
//
// What is detected: for ops that go through on_op, any two accesses to
// overlapping bytes of one storage from different streams, at least one a write
// (write after write, read after write, write after read), where the earlier one
// does not happen before the later. Reads after reads never conflict; ops of one
// stream are always ordered. Views of one storage conflict only when their byte
// ranges overlap; a strided view is described by its full span, which may report a
// conflict between interleaved views that touch disjoint elements (conservative).
//
// What is not: ops that do not go through the checker (the worker reports every
// op it runs on a stream; anything else is invisible); races between host code and
// a stream, since the host reads a tensor only through a sync point (get(), item(),
// synchronize), which waits for the work first (the worker tells the checker with
// on_host_wait / on_synchronize, so later ops are ordered after it); hazards
// between storages the caller describes as different (aliasing must show as one
// storage id). The checker judges the order in which it is told things: each
// stream's calls (on_op, on_record, on_wait) must come in that stream's order, and
// a wait must carry the clock of the record it waits for.
//
// Memory: per storage, the last write of each byte range and, of the reads since
// it, only those no later read of the same bytes is ordered after (so at most one
// per stream for each byte), cut to the bytes still live. forget(storage) drops a
// freed storage; forget_stream drops a destroyed stream once no kept access refers
// to it.
//
// Threads: every method may be called from any thread at once (one mutex; on_op
// with three accesses takes about 0.3 us uncontended, record + wait about 0.15 us).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "streams/vector_clock.h"

namespace thd::streams {

// One tensor an op touches. Ranges are bytes of the storage, [begin, end); an empty
// range touches nothing.
struct Access {
  uint64_t storage = 0;    // identity of the memory (the worker's storage id)
  int64_t begin = 0;       // >= 0
  int64_t end = 0;         // >= begin
  bool write = false;      // the op writes (or reads and writes) these bytes
  uint64_t tensor_id = 0;  // the master's tensor id, for the message
};

// One side of a hazard: an op and how it touched the tensor.
struct HazardSide {
  StreamKey stream;
  uint64_t op_id = 0;
  std::string op_name;
  uint64_t tensor_id = 0;
  bool write = false;
};

struct Hazard {
  uint64_t storage = 0;
  HazardSide current;  // the op about to run
  HazardSide earlier;  // the earlier access it is not ordered after

  // "stream hazard on tensor 12 (node 0): op 57 'add' on node 0 stream 2 reads it
  // while op 41 'mul_' on node 0 stream 1 wrote it with no event wait in between
  // (record an event on stream 1 after 'mul_' and make stream 2 wait on it)"
  std::string message() const;
};

class HazardChecker {
 public:
  HazardChecker();
  ~HazardChecker();
  HazardChecker(const HazardChecker&) = delete;
  HazardChecker& operator=(const HazardChecker&) = delete;

  // Call right before op `op_id` runs on `stream`: counts the op on the stream's
  // clock, checks each access against the kept accesses of overlapping bytes, then
  // keeps these accesses. Returns the hazards found, at most one per pair of
  // (earlier op, tensors); empty when none. Throws thd::ValueError for a malformed
  // range (begin < 0 or end < begin), before anything is recorded.
  std::vector<Hazard> on_op(StreamKey stream, uint64_t op_id, std::string_view op_name,
                            std::span<const Access> accesses);

  // An event is recorded on `stream` now: returns the clock the event carries (all
  // work issued on `stream` so far, and what that work waited for).
  VectorClock on_record(StreamKey stream);
  // `stream` waits on an event that carried `clock`: its later ops come after it.
  // Also the way to express implicit orderings (the legacy default stream syncing
  // with another stream: on_wait(default, on_record(other))). A merge, no allocation
  // once the streams involved are known to each other.
  void on_wait(StreamKey stream, const VectorClock& clock);
  // The host waited for the work `clock` stands for (Event::synchronize, or
  // Stream::synchronize with on_record's clock): every stream's later ops, and
  // those of streams first seen later, come after it.
  void on_host_wait(const VectorClock& clock);
  // Everything issued so far on every known stream completed (thd::synchronize on
  // this node): all later ops come after all of it.
  void on_synchronize();

  // The clock `stream`'s next op would be checked against, before its own tick.
  VectorClock clock(StreamKey stream) const;
  // The storage was freed: drops its history (its memory may be reused under the
  // same id without inheriting old accesses).
  void forget(uint64_t storage);
  // The stream was destroyed: drops its clock now and its entry in other clocks
  // once no kept access refers to it. Keys should not be reused: a key seen again
  // before it is dropped continues the old stream's count.
  void forget_stream(StreamKey stream);

  // For tests and stats.
  size_t tracked_storages() const;
  size_t tracked_accesses() const;  // kept access records, over all storages
  size_t tracked_streams() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace thd::streams
