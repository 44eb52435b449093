// Which peers of a message-library world are lost, why, and whether by their
// goodbye (Transport::peer_departed) or by a failure. Written under
// PipeTransport's engine lock, read from any thread: peer_error() is asked on
// every message, so it costs one atomic load while no peer is lost.
#pragma once

#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

namespace thd::detail::pipe {

class LostPeers {
 public:
  // `backend`: the op errors name ("ucx backend").
  LostPeers(int rank, int size, std::string backend);

  // Records `peer` lost because of `why` (the reason as a sentence), `departed`
  // when it was its goodbye; false when it was lost already (the first reason
  // stays).
  bool lose(int peer, std::string why, bool departed);
  // PeerLost("rank P is lost: <why>") for `peer`, null while it is not lost or
  // for a rank outside the world.
  std::exception_ptr error(int peer) const;
  bool departed(int peer) const;
  // The same PeerLost with `op` named, for the requests it fails.
  std::exception_ptr error_for(int peer, const std::string& op) const;
  bool any() const noexcept { return any_.load(std::memory_order_acquire); }

 private:
  const int rank_;
  const std::string backend_;
  mutable std::mutex mu_;
  std::vector<std::exception_ptr> lost_;  // by rank
  std::vector<std::string> why_;
  std::vector<char> departed_;
  std::atomic<bool> any_{false};
};

}  // namespace thd::detail::pipe
