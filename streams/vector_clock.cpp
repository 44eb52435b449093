#include "streams/vector_clock.h"

#include <algorithm>

#include "tensor/check.h"

namespace thd::streams {

namespace {

constexpr const char* kDeserializeOp = "VectorClock::deserialize";

bool key_less(const VectorClock::Entry& e, StreamKey k) { return e.stream < k; }

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

std::string describe(StreamKey key) {
  if (key.stream == 0) return fmt::format("node {} default stream", key.node);
  return fmt::format("node {} stream {}", key.node, key.stream);
}

std::vector<VectorClock::Entry>::iterator VectorClock::find_slot(StreamKey stream) {
  return std::lower_bound(entries_.begin(), entries_.end(), stream, key_less);
}

uint64_t VectorClock::get(StreamKey stream) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), stream, key_less);
  return it != entries_.end() && it->stream == stream ? it->count : 0;
}

uint64_t VectorClock::tick(StreamKey stream) {
  auto it = find_slot(stream);
  if (it != entries_.end() && it->stream == stream) return ++it->count;
  entries_.insert(it, Entry{stream, 1});
  return 1;
}

void VectorClock::raise(StreamKey stream, uint64_t count) {
  if (count == 0) return;
  auto it = find_slot(stream);
  if (it != entries_.end() && it->stream == stream) {
    it->count = std::max(it->count, count);
  } else {
    entries_.insert(it, Entry{stream, count});
  }
}

void VectorClock::erase(StreamKey stream) {
  auto it = find_slot(stream);
  if (it != entries_.end() && it->stream == stream) entries_.erase(it);
}

void VectorClock::merge(const VectorClock& other) {
  // Usual case: `other` names no stream this clock lacks (streams that sync keep
  // syncing), so the maxima go in place without allocating.
  auto mine = entries_.begin();
  bool in_place = true;
  for (const Entry& theirs : other.entries_) {
    while (mine != entries_.end() && mine->stream < theirs.stream) ++mine;
    if (mine == entries_.end() || mine->stream != theirs.stream) {
      in_place = false;
      break;
    }
    mine->count = std::max(mine->count, theirs.count);
  }
  if (in_place) return;

  std::vector<Entry> merged;
  merged.reserve(entries_.size() + other.entries_.size());
  auto a = entries_.begin();
  auto b = other.entries_.begin();
  while (a != entries_.end() || b != other.entries_.end()) {
    if (b == other.entries_.end() || (a != entries_.end() && a->stream < b->stream)) {
      merged.push_back(*a++);
    } else if (a == entries_.end() || b->stream < a->stream) {
      merged.push_back(*b++);
    } else {
      merged.push_back(Entry{a->stream, std::max(a->count, b->count)});
      ++a;
      ++b;
    }
  }
  entries_ = std::move(merged);
}

bool VectorClock::happens_before(const VectorClock& later) const {
  auto theirs = later.entries_.begin();
  for (const Entry& e : entries_) {
    while (theirs != later.entries_.end() && theirs->stream < e.stream) ++theirs;
    if (theirs == later.entries_.end() || theirs->stream != e.stream || theirs->count < e.count) {
      return false;
    }
  }
  return true;
}

std::vector<uint8_t> VectorClock::serialize() const {
  std::vector<uint8_t> out;
  out.reserve(kHeaderBytes + kEntryBytes * entries_.size());
  put_u32(out, kFormatVersion);
  put_u32(out, static_cast<uint32_t>(entries_.size()));
  for (const Entry& e : entries_) {
    put_u32(out, static_cast<uint32_t>(e.stream.node));
    put_u32(out, e.stream.stream);
    put_u64(out, e.count);
  }
  return out;
}

VectorClock VectorClock::deserialize(std::span<const uint8_t> bytes) {
  THD_CHECK(bytes.size() >= kHeaderBytes, ValueError, kDeserializeOp,
            "truncated vector clock: {} bytes, the header alone needs {}", bytes.size(), kHeaderBytes);
  const uint32_t version = get_u32(bytes.data());
  THD_CHECK(version == kFormatVersion, ValueError, kDeserializeOp,
            "vector clock format version {} is not supported (this build reads version {})", version,
            kFormatVersion);
  const size_t count = get_u32(bytes.data() + 4);
  THD_CHECK(count <= kMaxEntries, ValueError, kDeserializeOp,
            "vector clock claims {} entries, more than the limit of {}", count, kMaxEntries);
  const size_t expected = kHeaderBytes + count * kEntryBytes;
  THD_CHECK(bytes.size() == expected, ValueError, kDeserializeOp,
            "vector clock of {} entries takes {} bytes, got {} ({})", count, expected, bytes.size(),
            bytes.size() < expected ? "truncated" : "trailing bytes");

  VectorClock clock;
  clock.entries_.reserve(count);
  const uint8_t* p = bytes.data() + kHeaderBytes;
  for (size_t i = 0; i < count; ++i, p += kEntryBytes) {
    Entry e{StreamKey{static_cast<int32_t>(get_u32(p)), get_u32(p + 4)}, get_u64(p + 8)};
    THD_CHECK(e.count != 0, ValueError, kDeserializeOp, "vector clock entry {} ({}) has a zero count", i,
              describe(e.stream));
    THD_CHECK(clock.entries_.empty() || clock.entries_.back().stream < e.stream, ValueError, kDeserializeOp,
              "vector clock entry {} ({}) is out of order or repeated: entries must name streams in "
              "increasing order",
              i, describe(e.stream));
    clock.entries_.push_back(e);
  }
  return clock;
}

}  // namespace thd::streams
