#include "streams/trace_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string_view>

#include "streams/trace_file.h"
#include "tensor/check.h"
#include "tensor/function_ref.h"
#include "tensor/log.h"

namespace thd::trace {
namespace {

constexpr const char* kOp = "trace.write";
constexpr size_t kFlushBytes = size_t{1} << 20;

// Length of the valid UTF-8 sequence starting at s[i] (a non-ASCII lead byte), or 0
// when it is not valid: overlong forms, surrogates and code points past U+10FFFF are
// refused, as RFC 3629 says.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  auto cont = [&](size_t k, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return k < s.size() && at(k) >= lo && at(k) <= hi;
  };
  const unsigned char c = at(i);
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80;
    const unsigned char hi = c == 0xED ? 0x9F : 0xBF;
    return cont(i + 1, lo, hi) && cont(i + 2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned char lo = c == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = c == 0xF4 ? 0x8F : 0xBF;
    return cont(i + 1, lo, hi) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  }
  return 0;
}

void append_string(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_sequence_length(s, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

// Timestamps after adding offsets and subtracting the base: ts + offset - base spans
// up to 3 * 2^63 in magnitude, so it is computed exactly in 128 bits and one wild
// timestamp can neither overflow nor stop the file from being written.
using Wide = __int128;

// Nanoseconds as microseconds with three decimals: 1500 -> 1.500, -500 -> -0.500.
void append_us(std::string& out, Wide ns) {
  const auto mag = ns < 0 ? -static_cast<unsigned __int128>(ns) : static_cast<unsigned __int128>(ns);
  fmt::format_to(std::back_inserter(out), "{}{}.{:03}", ns < 0 ? "-" : "", static_cast<uint64_t>(mag / 1000),
                 static_cast<uint64_t>(mag % 1000));
}

void append_value(std::string& out, const ArgValue& value) {
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          append_string(out, v);
        } else if constexpr (std::is_same_v<T, bool>) {
          out += v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          if (std::isfinite(v)) {
            fmt::format_to(std::back_inserter(out), "{}", v);
          } else {  // JSON has no inf or nan
            append_string(out, std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
          }
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          out += '[';
          for (size_t i = 0; i < v.size(); ++i) fmt::format_to(std::back_inserter(out), "{}{}", i ? "," : "", v[i]);
          out += ']';
        } else {
          fmt::format_to(std::back_inserter(out), "{}", v);
        }
      },
      value.value());
}

Wide shifted(int64_t ts, int64_t offset) { return Wide{ts} + offset; }

// The earliest timestamp of the trace on the master's clock; 0 when it is empty.
Wide earliest(const std::vector<TracePart>& parts) {
  bool any = false;
  Wide first = 0;
  auto see = [&](Wide t) {
    first = any ? std::min(first, t) : t;
    any = true;
  };
  for (const TracePart& part : parts) {
    part.recorder->read([&](const TraceData& d) {
      for (const Slice& s : d.slices) see(shifted(s.begin_ns, part.offset_ns));
      for (const Flow& f : d.flows) see(shifted(f.ts_ns, part.offset_ns));
    });
  }
  return first;
}

class Emitter {
 public:
  Emitter(Wide base_ns, thd::detail::FunctionRef<void(std::string_view)> sink)
      : base_ns_(base_ns), sink_(sink) {}

  void part(const TracePart& p) {
    p.recorder->read([&](const TraceData& d) {
      for (const auto& [pid, n] : d.processes) {
        metadata("process_name", pid, 0, "name", n.name);
        metadata("process_sort_index", pid, 0, "sort_index", n.sort_index);
      }
      for (const auto& [key, n] : d.tracks) {
        metadata("thread_name", key.first, key.second, "name", n.name);
        metadata("thread_sort_index", key.first, key.second, "sort_index", n.sort_index);
      }
      for (const Slice& s : d.slices) slice(s, p.offset_ns);
      for (const Flow& f : d.flows) flow(f, p.offset_ns);
    });
  }

  void dropped_note(uint64_t dropped) {
    begin_event();
    out_ += "{\"ph\":\"i\",\"s\":\"g\",\"pid\":0,\"tid\":0,\"ts\":0.000,\"name\":";
    append_string(out_, fmt::format("thd trace: {} events dropped (a recorder reached its cap)", dropped));
    fmt::format_to(std::back_inserter(out_), ",\"args\":{{\"dropped_events\":{}}}}}", dropped);
    end_event();
  }

  std::string& text() { return out_; }
  void flush() {
    sink_(out_);
    out_.clear();
  }

 private:
  void begin_event() {
    if (events_++ > 0) out_ += ",\n";
  }
  void end_event() {
    if (out_.size() >= kFlushBytes) flush();
  }
  Wide relative(int64_t ts, int64_t offset) const { return shifted(ts, offset) - base_ns_; }

  void metadata(const char* name, int32_t pid, int32_t tid, const char* key, const ArgValue& value) {
    begin_event();
    fmt::format_to(std::back_inserter(out_), "{{\"ph\":\"M\",\"name\":\"{}\",\"pid\":{},\"tid\":{},\"args\":{{\"{}\":",
                   name, pid, tid, key);
    append_value(out_, value);
    out_ += "}}";
    end_event();
  }

  void slice(const Slice& s, int64_t offset) {
    begin_event();
    fmt::format_to(std::back_inserter(out_), "{{\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":", s.pid, s.tid);
    append_us(out_, relative(s.begin_ns, offset));
    out_ += ",\"dur\":";
    append_us(out_, s.duration_ns);
    out_ += ",\"name\":";
    append_string(out_, s.name);
    out_ += ",\"args\":{";
    for (size_t i = 0; i < s.args.size(); ++i) {
      if (i > 0) out_ += ',';
      append_string(out_, s.args[i].first);
      out_ += ':';
      append_value(out_, s.args[i].second);
    }
    out_ += "}}";
    end_event();
  }

  void flow(const Flow& f, int64_t offset) {
    begin_event();
    const bool begin = f.phase == FlowPhase::Begin;
    fmt::format_to(std::back_inserter(out_),
                   "{{\"ph\":\"{}\",\"cat\":\"thd\",\"name\":\"flow\",\"id\":\"0x{:x}\",\"pid\":{},\"tid\":{},\"ts\":",
                   begin ? 's' : 'f', f.id, f.pid, f.tid);
    append_us(out_, relative(f.ts_ns, offset));
    out_ += begin ? "}" : ",\"bp\":\"e\"}";
    end_event();
  }

  const Wide base_ns_;
  thd::detail::FunctionRef<void(std::string_view)> sink_;
  std::string out_;
  size_t events_ = 0;
};

void emit(const std::vector<TracePart>& parts, thd::detail::FunctionRef<void(std::string_view)> sink) {
  for (size_t i = 0; i < parts.size(); ++i) {
    THD_CHECK(parts[i].recorder != nullptr, ValueError, kOp, "trace part {} has no recorder", i);
  }
  const Wide base_ns = earliest(parts);
  Emitter e(base_ns, sink);
  e.text() += "{\"traceEvents\":[\n";
  uint64_t dropped = 0;
  std::string part_notes;
  for (size_t i = 0; i < parts.size(); ++i) {
    e.part(parts[i]);
    const uint64_t d = parts[i].recorder->dropped();
    dropped += d;
    fmt::format_to(std::back_inserter(part_notes), "{}{{\"offset_ns\":{},\"dropped_events\":{}}}",
                   i ? "," : "", parts[i].offset_ns, d);
  }
  if (dropped > 0) {
    e.dropped_note(dropped);
    THD_LOG_WARN("trace: {} events were dropped at the recorders' caps; the trace is incomplete", dropped);
  }
  fmt::format_to(std::back_inserter(e.text()),
                 "\n],\"displayTimeUnit\":\"ns\",\"metadata\":{{\"thd_clock_base_ns\":{},"
                 "\"thd_dropped_events\":{},\"thd_parts\":[{}]}}}}\n",
                 base_ns, dropped, part_notes);
  e.flush();
}

}  // namespace

std::string chrome_trace_json(const std::vector<TracePart>& parts) {
  std::string json;
  emit(parts, [&json](std::string_view chunk) { json.append(chunk); });
  return json;
}

void write_chrome_trace(const std::string& path, const std::vector<TracePart>& parts) {
  detail::AtomicFileWriter file(path);
  emit(parts, [&file](std::string_view chunk) { file.write(chunk); });
  file.commit();
}

}  // namespace thd::trace
