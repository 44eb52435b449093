#include "datachannel/pipe/liveness.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace thd::detail::pipe {

namespace {
constexpr uint8_t kHeartbeatMagic[Liveness::kHeartbeatBytes] = {'t', 'h', 'd', 'B'};
}  // namespace

bool Liveness::is_heartbeat(std::span<const uint8_t> message) noexcept {
  return message.size() == kHeartbeatBytes && std::memcmp(message.data(), kHeartbeatMagic, kHeartbeatBytes) == 0;
}

std::span<const uint8_t> Liveness::heartbeat() noexcept { return kHeartbeatMagic; }

Liveness::Liveness(int rank, int size, const LivenessTuning& tuning, net::Clock::time_point start,
                   ProcessIdentity self)
    : rank_(rank),
      tuning_(tuning),
      last_heard_(static_cast<size_t>(size), start),
      watch_(std::move(self)),
      exited_at_(static_cast<size_t>(size)) {}

bool Liveness::watch(int peer, std::string_view identity) {
  const auto who = ProcessIdentity::decode(identity);
  const bool watched = who && watch_.watch(peer, *who);
  watching_ = watching_ || watched;
  return watched;
}

bool Liveness::look_due(net::Clock::time_point now) noexcept {
  if (!watching_ || now < next_look_) return false;
  next_look_ = now + tuning_.watch_interval;
  return true;
}

void Liveness::saw_exit(int peer, net::Clock::time_point now) { exited_at_[static_cast<size_t>(peer)] = now; }

std::optional<Liveness::HeartbeatRound> Liveness::heartbeat_round(net::Clock::time_point now,
                                                                  const std::function<bool(int)>& tended) {
  if (!tuning_.heartbeats || now < next_heartbeat_) return std::nullopt;
  next_heartbeat_ = now + tuning_.heartbeat_interval;
  HeartbeatRound round;
  for (int p = 0; p < static_cast<int>(last_heard_.size()); ++p) {
    if (p == rank_ || !tended(p)) continue;
    if (now - last_heard_[static_cast<size_t>(p)] > tuning_.heartbeat_timeout) {
      round.lost.push_back({p, fmt::format("rank {} sent nothing for {} ms (not even a heartbeat): it died or stalled",
                                           p, tuning_.heartbeat_timeout.count())});
    } else {
      round.send_to.push_back(p);
    }
  }
  return round;
}

std::vector<Liveness::Lost> Liveness::exits(net::Clock::time_point now, bool look,
                                            const std::function<bool(int)>& lost) {
  if (look) {
    for (int p : watch_.exited()) saw_exit(p, now);
  }
  std::vector<Lost> gone;
  for (int p = 0; p < static_cast<int>(exited_at_.size()); ++p) {
    const auto& at = exited_at_[static_cast<size_t>(p)];
    if (!at || now - *at < tuning_.exit_grace || lost(p)) continue;
    gone.push_back({p, fmt::format("rank {}'s process (pid {} on this host) exited", p, watch_.pid_of(p))});
  }
  return gone;
}

}  // namespace thd::detail::pipe
