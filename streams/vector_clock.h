// Stream identities across a job and vector clocks over them: the happens-before
// bookkeeping of the stream hazard checker (streams/hazard_checker.h).
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace thd::streams {

// One stream of one node. Stream 0 is the node's default stream. Keys are meant to
// be unique for a session: a stream id is not reused for another stream.
struct StreamKey {
  int32_t node = 0;
  uint32_t stream = 0;

  friend auto operator<=>(const StreamKey&, const StreamKey&) = default;
  friend bool operator==(const StreamKey&, const StreamKey&) = default;
};

// "node 1 stream 3", or "node 1 default stream" for stream 0.
std::string describe(StreamKey key);

struct StreamKeyHash {
  size_t operator()(StreamKey k) const noexcept {
    const uint64_t packed = (static_cast<uint64_t>(static_cast<uint32_t>(k.node)) << 32) | k.stream;
    // splitmix64's finalizer: node and stream bits both reach every output bit.
    uint64_t x = packed + 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return static_cast<size_t>(x ^ (x >> 31));
  }
};

// For each stream, how many of its ops are known to happen before the holder of the
// clock (a stream's next op, or an event). A stream's own entry counts its ops; an
// entry absent is 0. Entries are kept sorted by stream, so a clock of a handful of
// streams is a small flat array: get is a binary search, merge one linear pass.
class VectorClock {
 public:
  struct Entry {
    StreamKey stream;
    uint64_t count = 0;
    friend bool operator==(const Entry&, const Entry&) = default;
  };

  // The most entries deserialize accepts: a clock names the streams whose work is
  // ordered before an event, which is far fewer in any real job (1024 nodes with 64
  // streams each). Bounds what a hostile notification can make a worker allocate.
  static constexpr size_t kMaxEntries = size_t{1} << 16;
  // Serialized form: a header (u32 version, u32 entry count), then per entry
  // i32 node, u32 stream, u64 count; all little-endian, entries in increasing
  // stream order, counts non-zero.
  static constexpr uint32_t kFormatVersion = 1;
  static constexpr size_t kHeaderBytes = 8;
  static constexpr size_t kEntryBytes = 16;

  uint64_t get(StreamKey stream) const;
  // Counts one more op of `stream`; returns its new count (the op's number).
  uint64_t tick(StreamKey stream);
  // Pointwise maximum: afterwards this clock has seen everything `other` had.
  void merge(const VectorClock& other);
  // Raises `stream`'s entry to at least `count`.
  void raise(StreamKey stream, uint64_t count);
  // Drops `stream`'s entry (as if it were 0).
  void erase(StreamKey stream);

  // True when op number `op` (1-based) of `stream` happens before the holder.
  bool covers(StreamKey stream, uint64_t op) const { return op <= get(stream); }
  // True when everything this clock has seen, `later` has seen too (pointwise <=):
  // the work this clock stands for happens before `later`'s holder.
  bool happens_before(const VectorClock& later) const;

  std::span<const Entry> entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  friend bool operator==(const VectorClock&, const VectorClock&) = default;

  // For a clock sent inside a cross-node event notification.
  std::vector<uint8_t> serialize() const;
  // Validates untrusted bytes: throws thd::ValueError naming what is wrong
  // (truncated, trailing bytes, unknown version, too many entries, entries out of
  // order or duplicated, zero counts). Allocates at most what `bytes` describes.
  static VectorClock deserialize(std::span<const uint8_t> bytes);

 private:
  std::vector<Entry>::iterator find_slot(StreamKey stream);

  std::vector<Entry> entries_;  // sorted by stream, counts > 0
};

}  // namespace thd::streams

template <>
struct std::hash<thd::streams::StreamKey> : thd::streams::StreamKeyHash {};
