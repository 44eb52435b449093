#include "datachannel/pipe/lost_peers.h"

#include <fmt/format.h>

#include "datachannel/check.h"

namespace thd::detail::pipe {

LostPeers::LostPeers(int rank, int size, std::string backend)
    : rank_(rank),
      backend_(std::move(backend)),
      lost_(static_cast<size_t>(size)),
      why_(static_cast<size_t>(size)),
      departed_(static_cast<size_t>(size), 0) {}

bool LostPeers::lose(int peer, std::string why, bool departed) {
  std::lock_guard lock(mu_);
  const auto i = static_cast<size_t>(peer);
  if (lost_[i]) return false;
  why_[i] = std::move(why);
  lost_[i] = std::make_exception_ptr(PeerLost(fmt::format("rank {} is lost: {}", peer, why_[i]),
                                              context_at(backend_, rank_, peer, __FILE__, __LINE__)));
  departed_[i] = departed ? 1 : 0;
  any_.store(true, std::memory_order_release);
  return true;
}

std::exception_ptr LostPeers::error(int peer) const {
  if (!any() || peer < 0 || peer >= static_cast<int>(lost_.size())) return nullptr;
  std::lock_guard lock(mu_);
  return lost_[static_cast<size_t>(peer)];
}

bool LostPeers::departed(int peer) const {
  if (!any() || peer < 0 || peer >= static_cast<int>(lost_.size())) return false;
  std::lock_guard lock(mu_);
  return departed_[static_cast<size_t>(peer)] != 0;
}

std::exception_ptr LostPeers::error_for(int peer, const std::string& op) const {
  std::lock_guard lock(mu_);
  return std::make_exception_ptr(PeerLost(fmt::format("rank {} is lost: {}", peer, why_[static_cast<size_t>(peer)]),
                                          context_at(op, rank_, peer, __FILE__, __LINE__)));
}

}  // namespace thd::detail::pipe
