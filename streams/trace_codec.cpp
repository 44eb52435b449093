// Recorder::serialize / deserialize: the binary form a worker ships to the master.
//
// Layout, all integers little-endian:
//   "THDTRACE" u32 version(=1) u64 dropped
//   u32 n, n x { i32 pid, i32 sort_index, str name }                  process names
//   u32 n, n x { i32 pid, i32 tid, i32 sort_index, str name }         track names
//   u64 n, n x { i32 pid, i32 tid, i64 begin_ns, i64 duration_ns,
//                str name, u32 nargs, nargs x { str key, u8 kind, value } }
//   u64 n, n x { u64 id, i32 pid, i32 tid, i64 ts_ns, u8 phase }      flows
//   str = u32 length + bytes; value by kind: 0 str, 1 i64, 2 u64, 3 f64 (bits),
//   4 u8 bool, 5 u32 count + count x i64.
// The reader checks each count against the bytes left (count x the smallest
// encoding of one item) before reserving, so a hostile length cannot allocate more
// than the input's size allows.
#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>

#include "streams/trace.h"
#include "tensor/check.h"

namespace thd::trace {
namespace {

constexpr char kMagic[8] = {'T', 'H', 'D', 'T', 'R', 'A', 'C', 'E'};
constexpr uint32_t kVersion = 1;
constexpr const char* kOp = "trace.deserialize";

enum class ArgKind : uint8_t { String = 0, Int = 1, UInt = 2, Double = 3, Bool = 4, IntList = 5 };

// Smallest encodings, for bounding counts by the bytes left.
constexpr size_t kMinProcess = 4 + 4 + 4;
constexpr size_t kMinTrack = 4 + 4 + 4 + 4;
constexpr size_t kMinSlice = 4 + 4 + 8 + 8 + 4 + 4;
constexpr size_t kMinArg = 4 + 1 + 1;
constexpr size_t kMinFlow = 8 + 4 + 4 + 8 + 1;

class Writer {
 public:
  template <typename T>
    requires std::is_integral_v<T>
  void put(T v) {
    using U = std::make_unsigned_t<T>;
    auto u = static_cast<U>(v);
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<uint8_t>(u >> (8 * i)));
  }
  void put_str(const std::string& s) {
    THD_CHECK(s.size() <= UINT32_MAX, ValueError, "trace.serialize",
              "a string of {} bytes is too long for a trace", s.size());
    put(static_cast<uint32_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}

  template <typename T>
    requires std::is_integral_v<T>
  T get(const char* what) {
    need(sizeof(T), what);
    using U = std::make_unsigned_t<T>;
    U u = 0;
    for (size_t i = 0; i < sizeof(T); ++i) u |= static_cast<U>(static_cast<U>(in_[pos_ + i]) << (8 * i));
    pos_ += sizeof(T);
    return static_cast<T>(u);
  }
  std::string get_str(const char* what) {
    const auto n = get<uint32_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  // A count of items each at least `min_size` bytes long, checked against what is left.
  size_t get_count_u32(const char* what, size_t min_size) { return bound(get<uint32_t>(what), what, min_size); }
  size_t get_count_u64(const char* what, size_t min_size) { return bound(get<uint64_t>(what), what, min_size); }
  int32_t get_id(const char* what) {
    const auto id = get<int32_t>(what);
    THD_CHECK(id >= 0, ValueError, kOp, "trace data: negative {} {} at byte {}", what, id, pos_ - 4);
    return id;
  }
  void expect_magic() {
    need(sizeof(kMagic), "the header");
    THD_CHECK(std::memcmp(in_.data(), kMagic, sizeof(kMagic)) == 0, ValueError, kOp,
              "not thd trace data (bad magic)");
    pos_ += sizeof(kMagic);
  }
  size_t pos() const { return pos_; }
  size_t left() const { return in_.size() - pos_; }

 private:
  void need(size_t n, const char* what) const {
    THD_CHECK(n <= left(), ValueError, kOp,
              "trace data truncated: {} needs {} bytes at byte {}, {} left", what, n, pos_, left());
  }
  size_t bound(uint64_t count, const char* what, size_t min_size) const {
    THD_CHECK(count <= left() / min_size, ValueError, kOp,
              "trace data: {} count {} at byte {} does not fit in the {} bytes left", what, count,
              pos_, left());
    return static_cast<size_t>(count);
  }

  std::span<const uint8_t> in_;
  size_t pos_ = 0;
};

void put_arg_value(Writer& w, const ArgValue& value) {
  std::visit(
      [&w](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          w.put(static_cast<uint8_t>(ArgKind::String));
          w.put_str(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          w.put(static_cast<uint8_t>(ArgKind::Int));
          w.put(v);
        } else if constexpr (std::is_same_v<T, uint64_t>) {
          w.put(static_cast<uint8_t>(ArgKind::UInt));
          w.put(v);
        } else if constexpr (std::is_same_v<T, double>) {
          w.put(static_cast<uint8_t>(ArgKind::Double));
          w.put(std::bit_cast<uint64_t>(v));
        } else if constexpr (std::is_same_v<T, bool>) {
          w.put(static_cast<uint8_t>(ArgKind::Bool));
          w.put(static_cast<uint8_t>(v ? 1 : 0));
        } else {
          static_assert(std::is_same_v<T, std::vector<int64_t>>);
          THD_CHECK(v.size() <= UINT32_MAX, ValueError, "trace.serialize",
                    "a list of {} values is too long for a trace", v.size());
          w.put(static_cast<uint8_t>(ArgKind::IntList));
          w.put(static_cast<uint32_t>(v.size()));
          for (int64_t x : v) w.put(x);
        }
      },
      value.value());
}

ArgValue get_arg_value(Reader& r) {
  const size_t at = r.pos();
  const auto kind = r.get<uint8_t>("an argument kind");
  switch (kind) {
    case static_cast<uint8_t>(ArgKind::String): return ArgValue(r.get_str("a string argument"));
    case static_cast<uint8_t>(ArgKind::Int): return ArgValue(r.get<int64_t>("an integer argument"));
    case static_cast<uint8_t>(ArgKind::UInt): return ArgValue(r.get<uint64_t>("an integer argument"));
    case static_cast<uint8_t>(ArgKind::Double):
      return ArgValue(std::bit_cast<double>(r.get<uint64_t>("a number argument")));
    case static_cast<uint8_t>(ArgKind::Bool): {
      const auto b = r.get<uint8_t>("a boolean argument");
      THD_CHECK(b <= 1, ValueError, kOp, "trace data: boolean {} at byte {} is not 0 or 1", b, at + 1);
      return ArgValue(b == 1);
    }
    case static_cast<uint8_t>(ArgKind::IntList): {
      const size_t n = r.get_count_u32("a list argument", sizeof(int64_t));
      std::vector<int64_t> list;
      list.reserve(n);
      for (size_t i = 0; i < n; ++i) list.push_back(r.get<int64_t>("a list element"));
      return ArgValue(std::move(list));
    }
    default: break;
  }
  THD_THROW(ValueError, kOp, "trace data: unknown argument kind {} at byte {}", kind, at);
}

}  // namespace

std::vector<uint8_t> Recorder::serialize() const {
  Writer w;
  std::lock_guard lock(mu_);
  for (char c : kMagic) w.put(static_cast<uint8_t>(c));
  w.put(kVersion);
  w.put(data_.dropped);
  w.put(static_cast<uint32_t>(data_.processes.size()));
  for (const auto& [pid, n] : data_.processes) {
    w.put(pid);
    w.put(n.sort_index);
    w.put_str(n.name);
  }
  w.put(static_cast<uint32_t>(data_.tracks.size()));
  for (const auto& [key, n] : data_.tracks) {
    w.put(key.first);
    w.put(key.second);
    w.put(n.sort_index);
    w.put_str(n.name);
  }
  w.put(static_cast<uint64_t>(data_.slices.size()));
  for (const Slice& s : data_.slices) {
    w.put(s.pid);
    w.put(s.tid);
    w.put(s.begin_ns);
    w.put(s.duration_ns);
    w.put_str(s.name);
    THD_CHECK(s.args.size() <= UINT32_MAX, ValueError, "trace.serialize", "too many arguments");
    w.put(static_cast<uint32_t>(s.args.size()));
    for (const auto& [key, value] : s.args) {
      w.put_str(key);
      put_arg_value(w, value);
    }
  }
  w.put(static_cast<uint64_t>(data_.flows.size()));
  for (const Flow& f : data_.flows) {
    w.put(f.id);
    w.put(f.pid);
    w.put(f.tid);
    w.put(f.ts_ns);
    w.put(static_cast<uint8_t>(f.phase));
  }
  return w.take();
}

Recorder Recorder::deserialize(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  r.expect_magic();
  const auto version = r.get<uint32_t>("the version");
  THD_CHECK(version == kVersion, ValueError, kOp, "trace data version {}, this build reads {}",
            version, kVersion);
  TraceData d;
  d.dropped = r.get<uint64_t>("the dropped count");

  const size_t n_processes = r.get_count_u32("process names", kMinProcess);
  for (size_t i = 0; i < n_processes; ++i) {
    const int32_t pid = r.get_id("pid");
    const auto sort_index = r.get<int32_t>("a sort index");
    const bool added = d.processes.emplace(pid, DisplayName{r.get_str("a process name"), sort_index}).second;
    THD_CHECK(added, ValueError, kOp, "trace data: process {} is named twice", pid);
  }
  const size_t n_tracks = r.get_count_u32("track names", kMinTrack);
  for (size_t i = 0; i < n_tracks; ++i) {
    const int32_t pid = r.get_id("pid");
    const int32_t tid = r.get_id("tid");
    const auto sort_index = r.get<int32_t>("a sort index");
    const bool added =
        d.tracks.emplace(std::make_pair(pid, tid), DisplayName{r.get_str("a track name"), sort_index}).second;
    THD_CHECK(added, ValueError, kOp, "trace data: track {}/{} is named twice", pid, tid);
  }

  const size_t n_slices = r.get_count_u64("slices", kMinSlice);
  d.slices.reserve(n_slices);
  for (size_t i = 0; i < n_slices; ++i) {
    Slice s;
    s.pid = r.get_id("pid");
    s.tid = r.get_id("tid");
    s.begin_ns = r.get<int64_t>("a slice begin");
    s.duration_ns = r.get<int64_t>("a slice duration");
    THD_CHECK(s.duration_ns >= 0, ValueError, kOp, "trace data: negative slice duration {} at byte {}",
              s.duration_ns, r.pos() - 8);
    s.name = r.get_str("a slice name");
    const size_t n_args = r.get_count_u32("slice arguments", kMinArg);
    s.args.reserve(n_args);
    for (size_t a = 0; a < n_args; ++a) {
      std::string key = r.get_str("an argument key");
      s.args.emplace_back(std::move(key), get_arg_value(r));
    }
    d.slices.push_back(std::move(s));
  }

  const size_t n_flows = r.get_count_u64("flows", kMinFlow);
  d.flows.reserve(n_flows);
  for (size_t i = 0; i < n_flows; ++i) {
    Flow f;
    f.id = r.get<uint64_t>("a flow id");
    f.pid = r.get_id("pid");
    f.tid = r.get_id("tid");
    f.ts_ns = r.get<int64_t>("a flow timestamp");
    const auto phase = r.get<uint8_t>("a flow phase");
    THD_CHECK(phase <= static_cast<uint8_t>(FlowPhase::End), ValueError, kOp,
              "trace data: unknown flow phase {} at byte {}", phase, r.pos() - 1);
    f.phase = static_cast<FlowPhase>(phase);
    d.flows.push_back(f);
  }
  THD_CHECK(r.left() == 0, ValueError, kOp, "trace data: {} unexpected bytes after the end at byte {}",
            r.left(), r.pos());

  const size_t held = d.slices.size() + d.flows.size();
  Recorder rec(true, std::max(kDefaultMaxEvents, held));
  rec.data_ = std::move(d);
  return rec;
}

}  // namespace thd::trace
