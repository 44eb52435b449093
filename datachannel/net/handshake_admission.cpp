#include "datachannel/net/handshake_admission.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

namespace thd::net {
namespace {

constexpr rlim_t kMinTotal = 16;
constexpr rlim_t kMaxTotal = 1024;
constexpr size_t kMinPerSource = 8;

}  // namespace

AdmissionLimits admission_limits_for(rlim_t soft_nofile) noexcept {
  const rlim_t total = std::clamp<rlim_t>(soft_nofile / 4, kMinTotal, kMaxTotal);
  AdmissionLimits limits;
  limits.total = static_cast<size_t>(total);
  limits.per_source = std::min(limits.total, std::max(kMinPerSource, limits.total / 2));
  return limits;
}

AdmissionLimits default_admission_limits() noexcept {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return admission_limits_for(1024);
  // RLIM_INFINITY is the largest rlim_t: the upper clamp applies.
  return admission_limits_for(limit.rlim_cur);
}

std::string source_address(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  char text[INET6_ADDRSTRLEN] = {};
  const void* raw = nullptr;
  if (addr.ss_family == AF_INET) raw = &reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr;
  if (addr.ss_family == AF_INET6) raw = &reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr;
  if (raw == nullptr || ::inet_ntop(addr.ss_family, raw, text, sizeof text) == nullptr) return "?";
  return text;
}

HandshakeAdmission::HandshakeAdmission(AdmissionLimits limits) : limits_(limits) {
  limits_.total = std::max<size_t>(limits_.total, 1);
  limits_.per_source = std::clamp<size_t>(limits_.per_source, 1, limits_.total);
}

std::vector<uint64_t> HandshakeAdmission::admit(uint64_t id, const std::string& source) {
  std::vector<uint64_t> out;
  release(id);  // a reused id starts afresh
  // Its own source first: a flood from one address makes room from itself, so
  // the pending connections of other sources are not touched.
  auto mine = by_source_.find(source);
  if (mine != by_source_.end() && mine->second.size() >= limits_.per_source) evict(*mine->second.begin(), out);
  if (by_age_.size() >= limits_.total) evict(by_age_.begin()->first, out);

  const uint64_t seq = next_seq_++;
  by_age_.emplace(seq, Entry{id, source});
  seq_of_[id] = seq;
  by_source_[source].insert(seq);
  return out;
}

void HandshakeAdmission::evict(uint64_t seq, std::vector<uint64_t>& out) {
  const uint64_t id = by_age_.at(seq).id;
  release(id);
  out.push_back(id);
  ++evicted_;
}

void HandshakeAdmission::release(uint64_t id) noexcept {
  auto it = seq_of_.find(id);
  if (it == seq_of_.end()) return;
  const uint64_t seq = it->second;
  seq_of_.erase(it);
  auto entry = by_age_.find(seq);
  auto source = by_source_.find(entry->second.source);
  source->second.erase(seq);
  if (source->second.empty()) by_source_.erase(source);
  by_age_.erase(entry);
}

size_t HandshakeAdmission::pending_from(const std::string& source) const {
  auto it = by_source_.find(source);
  return it == by_source_.end() ? 0 : it->second.size();
}

}  // namespace thd::net
