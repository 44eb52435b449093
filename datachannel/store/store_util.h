// Pieces every Store implementation shares, so all of them encode counters, apply
// compare_set and word their errors the same way.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace thd::detail {

using Bytes = std::vector<uint8_t>;
// The key-value map the in-process and file stores keep.
using KeyMap = std::unordered_map<std::string, Bytes>;

// The value of key in map, if any.
inline std::optional<Bytes> find_key(const KeyMap& map, const std::string& key) {
  auto it = map.find(key);
  if (it == map.end()) return std::nullopt;
  return it->second;
}

// The keys that map does not hold, in the order given.
inline std::vector<std::string> missing_keys(const KeyMap& map, const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (!map.contains(k)) out.push_back(k);
  }
  return out;
}

// A key as it appears in messages: quoted, control and non-ASCII bytes escaped,
// long keys shortened.
std::string describe_key(std::string_view key);
// "'a', 'b', 'c'", at most a handful, then "and N more".
std::string describe_keys(const std::vector<std::string>& keys);

// The counter add() keeps at a key: decimal text. `current` is nullopt for a
// missing key (0). Throws ValueError (op "store.add") for a value that is not a
// decimal int64 or a sum that overflows.
int64_t apply_add(const std::optional<Bytes>& current, int64_t delta, std::string_view key);
Bytes encode_counter(int64_t value);

// torch's compare_set rule. `current` is nullopt for a missing key. Returns what
// the store must hold afterwards (`store` says whether to write it) and what the
// call returns.
struct CompareSetOutcome {
  bool store = false;
  Bytes result;
};
CompareSetOutcome apply_compare_set(const std::optional<Bytes>& current, const Bytes& expected,
                                    const Bytes& desired);

// now + timeout for the stores' own waits, capped at ten years so that a "forever"
// timeout (milliseconds::max()) cannot overflow the clock.
std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout);

// The errors of a get or wait that ran out of time.
[[noreturn]] void throw_get_timeout(std::string_view key, std::chrono::milliseconds timeout);
[[noreturn]] void throw_wait_timeout(const std::vector<std::string>& missing, size_t total,
                                     std::chrono::milliseconds timeout);

}  // namespace thd::detail
