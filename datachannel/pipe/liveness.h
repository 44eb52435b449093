// Deciding that a peer is gone when the library does not say so.
//
// Two ways, each for the pipes and peers that need it:
// - heartbeats, for pipes that cannot tell a peer that died without a word
//   (MessagePipe::detects_silent_peer_loss false: libfabric's tcp and shm
//   providers): every peer is sent one every `heartbeat_interval`, and a peer
//   nothing was heard from for `heartbeat_timeout` is lost;
// - the process watch (process_watch.h), for peers on this host: a peer whose
//   process exited is lost `exit_grace` after it was seen gone, so that what it
//   sent before it died (its last replies, its goodbye) still arrives first.
//
// This class only decides, from the times it is given; PipeTransport sends the
// heartbeats and loses the peers. It runs under PipeTransport's engine lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "datachannel/net/socket.h"
#include "datachannel/pipe/process_watch.h"

namespace thd::detail::pipe {

struct LivenessTuning {
  bool heartbeats = false;
  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds heartbeat_timeout{4000};
  // How often the process watch looks for exited peers.
  std::chrono::milliseconds watch_interval{50};
  std::chrono::milliseconds exit_grace{200};
};

class Liveness {
 public:
  // A heartbeat on the wire: magic "thdB" only.
  static constexpr size_t kHeartbeatBytes = 4;
  static bool is_heartbeat(std::span<const uint8_t> message) noexcept;
  static std::span<const uint8_t> heartbeat() noexcept;

  // Every peer counts as heard from at `start`.
  Liveness(int rank, int size, const LivenessTuning& tuning, net::Clock::time_point start,
           ProcessIdentity self = this_process());

  bool heartbeats() const noexcept { return tuning_.heartbeats; }
  // Some peer's process is watched: the progress thread must look (look_due).
  bool watching() const noexcept { return watching_; }
  // How long the progress thread may sleep without missing a heartbeat.
  std::chrono::milliseconds nap(std::chrono::milliseconds longest) const noexcept {
    return tuning_.heartbeats ? std::min(longest, tuning_.heartbeat_interval) : longest;
  }

  // Something came from `peer` at `now` (only heartbeats read it).
  void heard(int peer, net::Clock::time_point now) noexcept { last_heard_[static_cast<size_t>(peer)] = now; }
  // Watches `peer`'s process when its published identity says it shares this
  // process's pid space; true if it is watched. A malformed identity only means
  // the peer is not watched.
  bool watch(int peer, std::string_view identity);
  // Whether the process watch is due a look at `now` (every watch_interval, only
  // while some peer is watched); a true answer starts the next interval.
  bool look_due(net::Clock::time_point now) noexcept;
  // `peer`'s process was seen gone at `now` (what a look at the watch reports).
  void saw_exit(int peer, net::Clock::time_point now);
  int64_t pid_of(int peer) const noexcept { return watch_.pid_of(peer); }

  struct Lost {
    int peer;
    std::string why;
  };
  struct HeartbeatRound {
    std::vector<int> send_to;  // peers to send a heartbeat now
    std::vector<Lost> lost;    // peers silent for longer than the timeout
  };
  // The heartbeat round due at `now`, nullopt when none is (or heartbeats are
  // off). `tended(peer)`: whether the peer takes part (it proved the token and is
  // not lost yet).
  std::optional<HeartbeatRound> heartbeat_round(net::Clock::time_point now, const std::function<bool(int)>& tended);
  // Looks at the watch (when `look`) and returns the peers whose process has been
  // gone for exit_grace; `lost(peer)`: already lost, and then left out.
  std::vector<Lost> exits(net::Clock::time_point now, bool look, const std::function<bool(int)>& lost);

 private:
  const int rank_;
  const LivenessTuning tuning_;
  std::vector<net::Clock::time_point> last_heard_;  // by rank
  net::Clock::time_point next_heartbeat_{};
  ProcessWatch watch_;
  bool watching_ = false;
  net::Clock::time_point next_look_{};
  std::vector<std::optional<net::Clock::time_point>> exited_at_;  // by rank
};

}  // namespace thd::detail::pipe
