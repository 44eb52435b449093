#include <thd/store.h>

#include <algorithm>
#include <charconv>

#include "datachannel/check.h"
#include "datachannel/store/store_util.h"

namespace thd {
namespace {

using std::chrono::milliseconds;

detail::Bytes to_bytes(std::string_view s) { return detail::Bytes(s.begin(), s.end()); }
std::string to_string(const detail::Bytes& b) { return std::string(b.begin(), b.end()); }

void check_timeout(milliseconds timeout, const char* op) {
  THD_CHECK(timeout.count() >= 0, ValueError, op, "timeout must be >= 0 ms, got {} ms", timeout.count());
}

}  // namespace

Store::~Store() = default;

void Store::set(const std::string& key, const std::vector<uint8_t>& value) { do_set(key, value); }

void Store::set(const std::string& key, std::string_view value) { do_set(key, to_bytes(value)); }

std::vector<uint8_t> Store::get(const std::string& key) { return do_get(key, timeout()); }

std::vector<uint8_t> Store::get(const std::string& key, milliseconds timeout) {
  check_timeout(timeout, "store.get");
  return do_get(key, timeout);
}

std::string Store::get_string(const std::string& key) { return to_string(get(key)); }

int64_t Store::add(const std::string& key, int64_t delta) { return do_add(key, delta); }

std::vector<uint8_t> Store::compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                        const std::vector<uint8_t>& desired) {
  return do_compare_set(key, expected, desired);
}

std::string Store::compare_set(const std::string& key, std::string_view expected, std::string_view desired) {
  return to_string(do_compare_set(key, to_bytes(expected), to_bytes(desired)));
}

void Store::wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }

void Store::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  check_timeout(timeout, "store.wait");
  if (keys.empty()) return;
  do_wait(keys, timeout);
}

bool Store::check(const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  return do_check(keys);
}

bool Store::delete_key(const std::string& key) { return do_delete_key(key); }

int64_t Store::num_keys() { return do_num_keys(); }

namespace detail {

std::string describe_key(std::string_view key) {
  constexpr size_t kMaxShown = 80;
  std::string out = "'";
  for (size_t i = 0; i < key.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  out += '\'';
  if (key.size() > kMaxShown) out += fmt::format(" (+{} more bytes)", key.size() - kMaxShown);
  return out;
}

std::string describe_keys(const std::vector<std::string>& keys) {
  constexpr size_t kMaxShown = 8;
  std::string out;
  for (size_t i = 0; i < keys.size() && i < kMaxShown; ++i) {
    if (i > 0) out += ", ";
    out += describe_key(keys[i]);
  }
  if (keys.size() > kMaxShown) out += fmt::format(" and {} more", keys.size() - kMaxShown);
  return out;
}

int64_t apply_add(const std::optional<Bytes>& current, int64_t delta, std::string_view key) {
  int64_t value = 0;
  if (current) {
    const char* first = reinterpret_cast<const char*>(current->data());
    const char* last = first + current->size();
    auto [end, ec] = std::from_chars(first, last, value);
    THD_CHECK(ec == std::errc() && end == last && first != last, ValueError, "store.add",
              "the value at key {} is not a decimal integer (it holds {} bytes: {}); add() keeps "
              "counters as decimal text",
              describe_key(key), current->size(), describe_key(std::string_view(first, last - first)));
  }
  int64_t sum = 0;
  THD_CHECK(!__builtin_add_overflow(value, delta, &sum), ValueError, "store.add",
            "{} + {} at key {} overflows int64", value, delta, describe_key(key));
  return sum;
}

std::chrono::steady_clock::time_point deadline_after(milliseconds timeout) {
  constexpr auto kForever = std::chrono::hours(24 * 365 * 10);
  return std::chrono::steady_clock::now() + std::min<std::chrono::steady_clock::duration>(timeout, kForever);
}

Bytes encode_counter(int64_t value) { return to_bytes(std::to_string(value)); }

CompareSetOutcome apply_compare_set(const std::optional<Bytes>& current, const Bytes& expected,
                                    const Bytes& desired) {
  if (!current) {
    if (expected.empty()) return {true, desired};
    return {false, expected};  // torch returns `expected` here: nothing is stored
  }
  if (*current == expected) return {true, desired};
  return {false, *current};
}

void throw_get_timeout(std::string_view key, milliseconds timeout) {
  THD_THROW(TimeoutError, "store.get", "key {} was not set within {} ms", describe_key(key), timeout.count());
}

void throw_wait_timeout(const std::vector<std::string>& missing, size_t total, milliseconds timeout) {
  THD_THROW(TimeoutError, "store.wait", "timed out after {} ms waiting for {} of {} keys: {}", timeout.count(),
            missing.size(), total, describe_keys(missing));
}

}  // namespace detail
}  // namespace thd
