#include "streams/hazard_checker.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "tensor/check.h"

namespace thd::streams {

namespace {

struct StreamState {
  StreamKey key;
  VectorClock clock;
  uint64_t records = 0;  // kept accesses made by this stream's ops
  bool retired = false;  // forget_stream was called
};

// Counts the kept accesses of a stream, so a retired stream is dropped once none is
// left. Used under the checker's mutex only, hence a plain counter.
class StreamRef {
 public:
  explicit StreamRef(StreamState* s) : s_(s) { ++s_->records; }
  StreamRef(const StreamRef& o) : s_(o.s_) { ++s_->records; }
  StreamRef(StreamRef&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  StreamRef& operator=(const StreamRef& o) {
    ++o.s_->records;
    release();
    s_ = o.s_;
    return *this;
  }
  StreamRef& operator=(StreamRef&& o) noexcept {
    if (this != &o) {
      release();
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }
  ~StreamRef() { release(); }

  const StreamState& operator*() const { return *s_; }
  const StreamState* operator->() const { return s_; }
  const StreamState* get() const { return s_; }

 private:
  void release() {
    if (s_ != nullptr) --s_->records;
  }
  StreamState* s_;
};

// One kept access: bytes [begin, end) of a storage, touched by op number `tick` of
// a stream.
struct Record {
  int64_t begin;
  int64_t end;
  bool write;
  uint64_t tick;
  uint64_t op_id;
  uint64_t tensor_id;
  StreamRef stream;
  std::string op_name;
};

bool overlaps(const Record& r, const Access& a) { return r.begin < a.end && a.begin < r.end; }

// Removes bytes [a.begin, a.end) from the records `superseded` selects, splitting
// a record the range cuts in two. The pieces left lie outside the range, so the
// scan skips the ones it appends.
template <typename Pred>
void cut(std::vector<Record>& records, const Access& a, Pred superseded) {
  for (size_t i = 0; i < records.size();) {
    Record& r = records[i];
    if (!overlaps(r, a) || !superseded(r)) {
      ++i;
      continue;
    }
    const bool keep_left = r.begin < a.begin;
    const bool keep_right = a.end < r.end;
    if (keep_left && keep_right) {
      Record right = r;
      right.begin = a.end;
      r.end = a.begin;
      records.push_back(std::move(right));
      ++i;
    } else if (keep_left) {
      r.end = a.begin;
      ++i;
    } else if (keep_right) {
      r.begin = a.end;
      ++i;
    } else {
      if (i + 1 != records.size()) r = std::move(records.back());
      records.pop_back();
    }
  }
}

// "stream 3" / "the default stream" beside the other stream of one node, else the
// full "node 1 stream 3".
std::string short_name(StreamKey key, StreamKey other) {
  if (key.node != other.node) return describe(key);
  return key.stream == 0 ? std::string("the default stream") : fmt::format("stream {}", key.stream);
}

}  // namespace

std::string Hazard::message() const {
  const std::string what_earlier =
      earlier.tensor_id == current.tensor_id
          ? std::string("it")
          : fmt::format("tensor {} (which shares its memory)", earlier.tensor_id);
  return fmt::format(
      "stream hazard on tensor {} (node {}): op {} '{}' on {} {} it while op {} '{}' on {} {} {} with "
      "no event wait in between (record an event on {} after '{}' and make {} wait on it)",
      current.tensor_id, current.stream.node, current.op_id, current.op_name, describe(current.stream),
      current.write ? "writes" : "reads", earlier.op_id, earlier.op_name, describe(earlier.stream),
      earlier.write ? "wrote" : "read", what_earlier, short_name(earlier.stream, current.stream),
      earlier.op_name, short_name(current.stream, earlier.stream));
}

struct HazardChecker::State {
  mutable std::mutex mu;
  std::unordered_map<StreamKey, StreamState, StreamKeyHash> streams;
  std::unordered_map<uint64_t, std::vector<Record>> storages;
  VectorClock host;                 // what every stream's later ops come after
  std::vector<StreamKey> retired;   // forgotten streams some kept access still names
  size_t records = 0;

  StreamState& stream(StreamKey key) {
    auto [it, fresh] = streams.try_emplace(key);
    StreamState& s = it->second;
    if (fresh) {
      s.key = key;
      s.clock = host;
    } else if (s.retired) {
      s.retired = false;
      s.clock.merge(host);
      std::erase(retired, key);
    }
    return s;
  }

  // Drops `key` from every clock, once nothing kept refers to its ops.
  void purge(StreamKey key) {
    streams.erase(key);
    for (auto& [k, s] : streams) s.clock.erase(key);
    host.erase(key);
  }

  void drop_unreferenced_retired() {
    for (size_t i = 0; i < retired.size();) {
      auto it = streams.find(retired[i]);
      if (it == streams.end() || it->second.records == 0) {
        purge(retired[i]);
        retired[i] = retired.back();
        retired.pop_back();
      } else {
        ++i;
      }
    }
  }
};

HazardChecker::HazardChecker() : state_(std::make_unique<State>()) {}
HazardChecker::~HazardChecker() = default;

std::vector<Hazard> HazardChecker::on_op(StreamKey stream, uint64_t op_id, std::string_view op_name,
                                         std::span<const Access> accesses) {
  for (const Access& a : accesses) {
    THD_CHECK(a.begin >= 0 && a.begin <= a.end, ValueError, "stream check",
              "op {} '{}' on {}: tensor {} has byte range [{}, {}) of storage {}; a range needs "
              "0 <= begin <= end",
              op_id, op_name, describe(stream), a.tensor_id, a.begin, a.end, a.storage);
  }

  State& st = *state_;
  std::lock_guard lock(st.mu);
  StreamState& self = st.stream(stream);
  const uint64_t tick = self.clock.tick(stream);
  const VectorClock& now = self.clock;

  std::vector<Hazard> hazards;
  for (const Access& a : accesses) {
    if (a.begin == a.end) continue;
    auto found = st.storages.find(a.storage);
    if (found == st.storages.end()) continue;
    for (const Record& r : found->second) {
      if (!(r.write || a.write) || !overlaps(r, a)) continue;
      if (r.stream.get() == &self || now.covers(r.stream->key, r.tick)) continue;
      const bool seen = std::any_of(hazards.begin(), hazards.end(), [&](const Hazard& h) {
        return h.earlier.op_id == r.op_id && h.earlier.stream == r.stream->key &&
               h.earlier.tensor_id == r.tensor_id && h.current.tensor_id == a.tensor_id;
      });
      if (seen) continue;
      hazards.push_back(Hazard{
          .storage = a.storage,
          .current = {stream, op_id, std::string(op_name), a.tensor_id, a.write},
          .earlier = {r.stream->key, r.op_id, r.op_name, r.tensor_id, r.write},
      });
    }
  }

  for (const Access& a : accesses) {
    if (a.begin == a.end) continue;
    std::vector<Record>& records = st.storages[a.storage];
    const size_t before = records.size();
    if (a.write) {
      // A later access ordered after this write is ordered after everything kept
      // here (or this write raced with it, reported above); one not ordered after
      // it conflicts with this write itself.
      cut(records, a, [](const Record&) { return true; });
    } else {
      // A read ordered before this one is covered by it: a later write that
      // conflicts with the older read conflicts with this one too. The last write
      // stays: later reads on other streams are checked against it.
      cut(records, a, [&](const Record& r) {
        return !r.write && (r.stream.get() == &self || now.covers(r.stream->key, r.tick));
      });
    }
    records.push_back(Record{a.begin, a.end, a.write, tick, op_id, a.tensor_id, StreamRef(&self),
                             std::string(op_name)});
    st.records += records.size();
    st.records -= before;
  }
  if (!st.retired.empty()) st.drop_unreferenced_retired();
  return hazards;
}

VectorClock HazardChecker::on_record(StreamKey stream) {
  std::lock_guard lock(state_->mu);
  return state_->stream(stream).clock;
}

void HazardChecker::on_wait(StreamKey stream, const VectorClock& clock) {
  std::lock_guard lock(state_->mu);
  state_->stream(stream).clock.merge(clock);
}

void HazardChecker::on_host_wait(const VectorClock& clock) {
  std::lock_guard lock(state_->mu);
  state_->host.merge(clock);
  for (auto& [key, s] : state_->streams) {
    if (!s.retired) s.clock.merge(clock);
  }
}

void HazardChecker::on_synchronize() {
  std::lock_guard lock(state_->mu);
  State& st = *state_;
  for (auto& [key, s] : st.streams) {
    if (!s.retired) st.host.merge(s.clock);
  }
  for (auto& [key, s] : st.streams) {
    if (!s.retired) s.clock = st.host;
  }
}

VectorClock HazardChecker::clock(StreamKey stream) const {
  std::lock_guard lock(state_->mu);
  auto it = state_->streams.find(stream);
  if (it == state_->streams.end() || it->second.retired) {
    VectorClock c = state_->host;
    if (it != state_->streams.end()) c.merge(it->second.clock);
    return c;
  }
  return it->second.clock;
}

void HazardChecker::forget(uint64_t storage) {
  std::lock_guard lock(state_->mu);
  State& st = *state_;
  auto it = st.storages.find(storage);
  if (it == st.storages.end()) return;
  st.records -= it->second.size();
  st.storages.erase(it);
  if (!st.retired.empty()) st.drop_unreferenced_retired();
}

void HazardChecker::forget_stream(StreamKey stream) {
  std::lock_guard lock(state_->mu);
  State& st = *state_;
  auto it = st.streams.find(stream);
  if (it == st.streams.end()) {
    st.purge(stream);  // a stream known only through clocks (another node's)
    return;
  }
  StreamState& s = it->second;
  if (s.retired) return;
  if (s.records == 0) {
    st.purge(stream);
    return;
  }
  // Kept accesses still name its ops: keep its count, so other clocks' entries
  // for it stay meaningful until those accesses go.
  const uint64_t own = s.clock.get(stream);
  s.clock = VectorClock();
  s.clock.raise(stream, own);
  s.retired = true;
  st.retired.push_back(stream);
}

size_t HazardChecker::tracked_storages() const {
  std::lock_guard lock(state_->mu);
  return state_->storages.size();
}

size_t HazardChecker::tracked_accesses() const {
  std::lock_guard lock(state_->mu);
  return state_->records;
}

size_t HazardChecker::tracked_streams() const {
  std::lock_guard lock(state_->mu);
  return state_->streams.size();
}

}  // namespace thd::streams
