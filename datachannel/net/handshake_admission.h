// Admission of connections that have not proven the job's token yet, for every
// listener that runs the auth handshake (the tcp mesh acceptor, the TCPStore
// server, and through it a worker pool's address). Anyone who can reach a port
// can open connections and say nothing; each holds a descriptor until the
// handshake timeout. Unbounded, a flood of them exhausts the process's
// descriptors (RLIMIT_NOFILE), and a legitimate client then waits in the listen
// backlog until the silent ones time out.
//
// The policy (docs/security.md): at most `per_source` pending connections from one
// source address and `total` in all, both well below the descriptor limit, so the
// rest stays for authenticated peers and the process's own files. A new connection
// over a limit evicts the OLDEST pending one (of its source, else overall); the
// newcomer is always admitted. A legitimate client finishes its handshake within a
// round trip, so it is the youngest pending connection for as long as it is pending,
// and a flood must open a whole cap's worth of connections within that round trip
// to push it out; refusing newcomers instead would turn the flood's silent
// connections into a wall that the legitimate client cannot pass until they time
// out. A client that is evicted anyway retries within its connect timeout
// (net::connect_authenticated).
//
// Not thread-safe: each listener's loop owns its own.
#pragma once

#include <sys/resource.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace thd::net {

struct AdmissionLimits {
  size_t total = 0;       // pending connections in all, >= 1
  size_t per_source = 0;  // pending connections from one source address, 1..total
};

// The limits for a process whose soft descriptor limit is `soft_nofile`: a quarter
// of it in all (at least 16, at most 1024), half of that per source (at least 8).
// At the common 1024 that is 256 and 128; at 512, 128 and 64.
AdmissionLimits admission_limits_for(rlim_t soft_nofile) noexcept;
// admission_limits_for this process's soft RLIMIT_NOFILE now (1024 when
// getrlimit fails; unlimited gets the upper clamp).
AdmissionLimits default_admission_limits() noexcept;

// The source address of a connected socket ("127.0.0.1", "::1"), without the port:
// what per-source limits count. "?" when the kernel cannot say.
std::string source_address(int fd);

class HandshakeAdmission {
 public:
  explicit HandshakeAdmission(AdmissionLimits limits = default_admission_limits());

  // Connection `id` (unique among those pending) from `source` now awaits its
  // handshake. Returns the ids of pending connections the caller must close at
  // once to stay within the limits, oldest first; never `id` itself. They are no
  // longer counted.
  std::vector<uint64_t> admit(uint64_t id, const std::string& source);
  // `id` no longer awaits its handshake: it proved the token, was refused or
  // closed. Unknown ids are ignored, so every way out may call it.
  void release(uint64_t id) noexcept;

  size_t pending() const noexcept { return by_age_.size(); }
  size_t pending_from(const std::string& source) const;
  const AdmissionLimits& limits() const noexcept { return limits_; }
  // How many connections admit() has evicted so far.
  uint64_t evicted() const noexcept { return evicted_; }

 private:
  struct Entry {
    uint64_t id;
    std::string source;
  };
  void evict(uint64_t seq, std::vector<uint64_t>& out);

  AdmissionLimits limits_;
  uint64_t next_seq_ = 0;
  uint64_t evicted_ = 0;
  std::map<uint64_t, Entry> by_age_;                          // admission order -> connection
  std::unordered_map<uint64_t, uint64_t> seq_of_;             // id -> admission order
  std::unordered_map<std::string, std::set<uint64_t>> by_source_;  // source -> its admission orders
};

}  // namespace thd::net
