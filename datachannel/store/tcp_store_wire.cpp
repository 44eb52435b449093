#include "datachannel/store/tcp_store_wire.h"

#include <fmt/format.h>

#include <cstring>

namespace thd::detail::store_wire {
namespace {

class Writer {
 public:
  Writer() { buf_.resize(kLengthBytes); }  // the length is filled in by finish()

  void u8(uint8_t v) { buf_.push_back(v); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void bytes(std::span<const uint8_t> b) {
    u32(static_cast<uint32_t>(b.size()));
    buf_.insert(buf_.end(), b.begin(), b.end());
  }
  void str(std::string_view s) { bytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()}); }
  void strs(const std::vector<std::string>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (const auto& s : v) str(s);
  }

  Bytes finish() && {
    // Bodies past 4 GiB cannot be framed; the sender's size check rejects them
    // long before (kMaxMessageBytes), this only keeps the prefix from wrapping.
    const uint64_t body = buf_.size() - kLengthBytes;
    const auto n = static_cast<uint32_t>(body > UINT32_MAX ? UINT32_MAX : body);
    for (int i = 0; i < 4; ++i) buf_[i] = static_cast<uint8_t>(n >> (8 * i));
    return std::move(buf_);
  }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  Bytes buf_;
};

// Bounds-checked reads; the first failure sticks and names the field.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> data) : data_(data) {}

  bool u8(uint8_t* v, const char* what) {
    if (!need(1, what)) return false;
    *v = data_[pos_++];
    return true;
  }
  bool u32(uint32_t* v, const char* what) {
    uint64_t x;
    if (!le(&x, 4, what)) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  }
  bool u64(uint64_t* v, const char* what) { return le(v, 8, what); }
  bool bytes(Bytes* out, const char* what) {
    uint32_t n;
    if (!u32(&n, what) || !need(n, what)) return false;
    out->assign(data_.begin() + static_cast<ptrdiff_t>(pos_), data_.begin() + static_cast<ptrdiff_t>(pos_ + n));
    pos_ += n;
    return true;
  }
  bool str(std::string* out, const char* what) {
    uint32_t n;
    if (!u32(&n, what) || !need(n, what)) return false;
    out->assign(reinterpret_cast<const char*>(data_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  bool strs(std::vector<std::string>* out, const char* what) {
    uint32_t count;
    if (!u32(&count, what)) return false;
    // Each key takes at least its 4-byte length: a count that cannot fit in what
    // is left is a lie, refused before reserving memory for it.
    if (count > (data_.size() - pos_) / 4) {
      return fail(fmt::format("a count of {} {} does not fit in the message", count, what));
    }
    out->resize(count);
    for (auto& s : *out) {
      if (!str(&s, what)) return false;
    }
    return true;
  }
  bool end() {
    if (pos_ != data_.size()) return fail(fmt::format("{} bytes left over after the message", data_.size() - pos_));
    return true;
  }
  const std::string& why() const { return why_; }
  bool fail(std::string why) {
    if (why_.empty()) why_ = std::move(why);
    return false;
  }

 private:
  bool need(size_t n, const char* what) {
    if (data_.size() - pos_ < n) return fail(fmt::format("truncated {}", what));
    return true;
  }
  bool le(uint64_t* v, int n, const char* what) {
    if (!need(static_cast<size_t>(n), what)) return false;
    uint64_t x = 0;
    for (int i = 0; i < n; ++i) x |= uint64_t{data_[pos_ + i]} << (8 * i);
    pos_ += static_cast<size_t>(n);
    *v = x;
    return true;
  }

  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  std::string why_;
};

bool valid_command(uint8_t c) { return c >= 1 && c <= static_cast<uint8_t>(Command::Join); }

}  // namespace

std::string_view command_name(Command command) {
  switch (command) {
    case Command::Set: return "set";
    case Command::Get: return "get";
    case Command::Add: return "add";
    case Command::CompareSet: return "compare_set";
    case Command::Wait: return "wait";
    case Command::Check: return "check";
    case Command::DeleteKey: return "delete_key";
    case Command::NumKeys: return "num_keys";
    case Command::Join: return "join";
  }
  return "unknown";
}

uint32_t decode_length(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{p[i]} << (8 * i);
  return v;
}

Bytes encode_request(const Request& r) {
  Writer w;
  w.u8(static_cast<uint8_t>(r.command));
  switch (r.command) {
    case Command::Set:
      w.str(r.key);
      w.bytes(r.value);
      break;
    case Command::Get:
      w.u64(r.timeout_ms);
      w.str(r.key);
      break;
    case Command::Add:
      w.str(r.key);
      w.u64(static_cast<uint64_t>(r.delta));
      break;
    case Command::CompareSet:
      w.str(r.key);
      w.bytes(r.expected);
      w.bytes(r.value);
      break;
    case Command::Wait:
      w.u64(r.timeout_ms);
      w.strs(r.keys);
      break;
    case Command::Check:
      w.strs(r.keys);
      break;
    case Command::DeleteKey:
      w.str(r.key);
      break;
    case Command::NumKeys:
    case Command::Join:
      break;
  }
  return std::move(w).finish();
}

bool decode_request(std::span<const uint8_t> body, Request* out, std::string* why) {
  Reader r(body);
  uint8_t c = 0;
  bool ok = r.u8(&c, "command");
  if (ok && !valid_command(c)) ok = r.fail(fmt::format("unknown command {}", c));
  if (ok) {
    out->command = static_cast<Command>(c);
    uint64_t delta = 0;
    switch (out->command) {
      case Command::Set:
        ok = r.str(&out->key, "key") && r.bytes(&out->value, "value");
        break;
      case Command::Get:
        ok = r.u64(&out->timeout_ms, "timeout") && r.str(&out->key, "key");
        break;
      case Command::Add:
        ok = r.str(&out->key, "key") && r.u64(&delta, "delta");
        out->delta = static_cast<int64_t>(delta);
        break;
      case Command::CompareSet:
        ok = r.str(&out->key, "key") && r.bytes(&out->expected, "expected value") &&
             r.bytes(&out->value, "desired value");
        break;
      case Command::Wait:
        ok = r.u64(&out->timeout_ms, "timeout") && r.strs(&out->keys, "keys");
        break;
      case Command::Check:
        ok = r.strs(&out->keys, "keys");
        break;
      case Command::DeleteKey:
        ok = r.str(&out->key, "key");
        break;
      case Command::NumKeys:
      case Command::Join:
        break;
    }
  }
  ok = ok && r.end();
  if (!ok) *why = r.why();
  return ok;
}

Bytes encode_reply(Command command, const Reply& reply) {
  Writer w;
  w.u8(static_cast<uint8_t>(reply.status));
  switch (reply.status) {
    case Status::Ok:
      switch (command) {
        case Command::Get:
        case Command::CompareSet:
          w.bytes(reply.value);
          break;
        case Command::Add:
        case Command::NumKeys:
          w.u64(static_cast<uint64_t>(reply.integer));
          break;
        case Command::Check:
        case Command::DeleteKey:
          w.u8(reply.integer != 0 ? 1 : 0);
          break;
        case Command::Set:
        case Command::Wait:
        case Command::Join:
          break;
      }
      break;
    case Status::Timeout:
      w.strs(reply.keys);
      break;
    case Status::Error:
      w.str(reply.message);
      break;
  }
  return std::move(w).finish();
}

bool decode_reply(Command command, std::span<const uint8_t> body, Reply* out, std::string* why) {
  Reader r(body);
  uint8_t s = 0;
  bool ok = r.u8(&s, "status");
  if (ok && s > static_cast<uint8_t>(Status::Error)) ok = r.fail(fmt::format("unknown status {}", s));
  if (ok) {
    out->status = static_cast<Status>(s);
    switch (out->status) {
      case Status::Ok: {
        uint64_t x = 0;
        uint8_t b = 0;
        switch (command) {
          case Command::Get:
          case Command::CompareSet:
            ok = r.bytes(&out->value, "value");
            break;
          case Command::Add:
          case Command::NumKeys:
            ok = r.u64(&x, "integer");
            out->integer = static_cast<int64_t>(x);
            break;
          case Command::Check:
          case Command::DeleteKey:
            ok = r.u8(&b, "bool");
            if (ok && b > 1) ok = r.fail(fmt::format("bool {} is neither 0 nor 1", b));
            out->integer = b;
            break;
          case Command::Set:
          case Command::Wait:
          case Command::Join:
            break;
        }
        break;
      }
      case Status::Timeout:
        ok = r.strs(&out->keys, "missing keys");
        break;
      case Status::Error:
        ok = r.str(&out->message, "error message");
        break;
    }
  }
  ok = ok && r.end();
  if (!ok) *why = r.why();
  return ok;
}

}  // namespace thd::detail::store_wire
