// The worker pool's bookkeeping in its store (docs/worker_pool.md): how a master
// claims the pool for one session and how the workers serve sessions one after
// another. master/pool_attach.cpp (the claiming side) and worker/pool.cpp (the
// serving side) both speak it, so it lives here, in the layer both depend on.
//
// Keys, at the root of the pool's store:
//   pool/size                  N, the number of worker nodes (set once, by whoever
//                              hosts the store or by the first worker)
//   pool/worker/<i>            set by node i's process when it starts serving
//   pool/next_session          counter: every claim attempt draws a fresh id k
//   pool/active                the id of the session holding the pool; "" or
//                              missing when the pool is free
//   pool/session/<k>/config    what the workers need to join k (backend, timeout),
//                              written by its master before it claims the pool
//   pool/session/<k>/joined/<i>    node i's process took part in k
//   pool/session/<k>/finished/<i>  node i is done with k (how it ended)
//   pool/session/<k>/detached  k's master called shutdown
//   pool/session/<k>/channel/  the session's DataChannel rendezvous namespace
// A session is "ending" once it is detached or any node finished it; the last node
// to finish it releases the pool (compare_set pool/active k -> "").
#pragma once

#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "tensor/check.h"

namespace thd::pool {

inline constexpr const char* kSizeKey = "pool/size";
inline constexpr const char* kActiveKey = "pool/active";
inline constexpr const char* kNextSessionKey = "pool/next_session";

// More nodes than this is a typo, as thdrun's -n.
inline constexpr int kMaxNodes = 1024;

inline std::string worker_key(int node) { return fmt::format("pool/worker/{}", node); }
inline std::string session_prefix(uint64_t session) { return fmt::format("pool/session/{}", session); }
inline std::string config_key(uint64_t session) { return session_prefix(session) + "/config"; }
inline std::string detached_key(uint64_t session) { return session_prefix(session) + "/detached"; }
inline std::string joined_key(uint64_t session, int node) {
  return fmt::format("{}/joined/{}", session_prefix(session), node);
}
inline std::string finished_key(uint64_t session, int node) {
  return fmt::format("{}/finished/{}", session_prefix(session), node);
}
// PrefixStore adds the "/" between this and the DataChannel's own keys.
inline std::string channel_prefix(uint64_t session) { return session_prefix(session) + "/channel"; }

inline std::vector<std::string> finished_keys(uint64_t session, int nodes) {
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(nodes));
  for (int i = 0; i < nodes; ++i) keys.push_back(finished_key(session, i));
  return keys;
}

// A whole decimal number in [min, max], or nullopt.
inline std::optional<int64_t> parse_decimal(std::string_view text, int64_t min, int64_t max) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < min || v > max) {
    return std::nullopt;
  }
  return v;
}

// The session id pool/active holds; nullopt for a free pool ("").
inline std::optional<uint64_t> parse_active(std::string_view value, std::string_view op) {
  if (value.empty()) return std::nullopt;
  auto v = parse_decimal(value, 1, INT64_MAX);
  THD_CHECK(v.has_value(), ValueError, std::string(op),
            "the pool's store holds '{}' at {}, which is not a session id: is this store shared with "
            "something else?",
            value.substr(0, 64), kActiveKey);
  return static_cast<uint64_t>(*v);
}

inline int parse_size(std::string_view value, std::string_view op) {
  auto v = parse_decimal(value, 1, kMaxNodes);
  THD_CHECK(v.has_value(), ValueError, std::string(op),
            "the pool's store holds '{}' at {}, which is not a number of nodes from 1 to {}", value.substr(0, 64),
            kSizeKey, kMaxNodes);
  return static_cast<int>(*v);
}

// What a master tells the workers about its session, as "name=value" lines.
struct SessionConfig {
  std::string backend;
  // The session's DataChannel timeout: its set-up and every wait.
  std::chrono::milliseconds timeout{0};
};

inline std::string encode_config(const SessionConfig& c) {
  return fmt::format("backend={}\ntimeout_ms={}\n", c.backend, c.timeout.count());
}

inline SessionConfig decode_config(std::string_view text, std::string_view op) {
  constexpr size_t kMaxConfigBytes = 4096;
  THD_CHECK(text.size() <= kMaxConfigBytes, ValueError, std::string(op), "session config of {} bytes (at most {})",
            text.size(), kMaxConfigBytes);
  SessionConfig c;
  bool has_backend = false, has_timeout = false;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    THD_CHECK(eq != std::string_view::npos, ValueError, std::string(op), "malformed session config line '{}'", line);
    const std::string_view name = line.substr(0, eq), value = line.substr(eq + 1);
    if (name == "backend") {
      THD_CHECK(!value.empty() && value.size() <= 64 &&
                    value.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string_view::npos,
                ValueError, std::string(op), "session config names backend '{}'", value.substr(0, 64));
      c.backend = std::string(value);
      has_backend = true;
    } else if (name == "timeout_ms") {
      auto ms = parse_decimal(value, 0, int64_t{1} << 40);
      THD_CHECK(ms.has_value(), ValueError, std::string(op), "session config has timeout_ms '{}'", value);
      c.timeout = std::chrono::milliseconds(*ms);
      has_timeout = true;
    }
    // Other names come from newer masters; an older worker does without them.
  }
  THD_CHECK(has_backend && has_timeout, ValueError, std::string(op),
            "session config lacks {}", has_backend ? "timeout_ms" : "backend");
  return c;
}

struct PoolAddress {
  std::string host;
  uint16_t port = 0;
};

// "tcp://host:port" or "tcp://[v6]:port" (the pool's store); ValueError otherwise.
inline PoolAddress parse_pool_url(std::string_view url, std::string_view op) {
  const std::string o(op);
  THD_CHECK(url.starts_with("tcp://"), ValueError, o, "a worker pool's address is tcp://host:port, got '{}'", url);
  std::string_view rest = url.substr(6);
  std::string_view host, port;
  if (rest.starts_with('[')) {
    const size_t close = rest.find(']');
    THD_CHECK(close != std::string_view::npos, ValueError, o, "'{}': unterminated '[' in the host", url);
    host = rest.substr(1, close - 1);
    rest = rest.substr(close + 1);
    THD_CHECK(rest.starts_with(':'), ValueError, o, "'{}' has no port; expected tcp://[v6]:port", url);
    port = rest.substr(1);
  } else {
    const size_t colon = rest.rfind(':');
    THD_CHECK(colon != std::string_view::npos, ValueError, o, "'{}' has no port; expected tcp://host:port", url);
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    THD_CHECK(host.find(':') == std::string_view::npos, ValueError, o,
              "'{}': write IPv6 addresses in brackets, e.g. tcp://[::1]:29500", url);
  }
  THD_CHECK(!host.empty(), ValueError, o, "'{}' has no host; expected tcp://host:port", url);
  THD_CHECK(host.find_first_of("/?#") == std::string_view::npos && port.find_first_of("/?#") == std::string_view::npos,
            ValueError, o, "'{}': tcp:// takes only host:port, with no path or query", url);
  auto p = parse_decimal(port, 1, 65535);
  THD_CHECK(p.has_value(), ValueError, o, "'{}': port '{}' is not a number in 1..65535", url, port);
  return PoolAddress{std::string(host), static_cast<uint16_t>(*p)};
}

inline std::string pool_url(const std::string& host, uint16_t port) {
  return host.find(':') != std::string::npos ? fmt::format("tcp://[{}]:{}", host, port)
                                             : fmt::format("tcp://{}:{}", host, port);
}

}  // namespace thd::pool
