#include "datachannel/request_state.h"

namespace thd::detail {

bool RequestState::complete(int source_world_rank, size_t nbytes) noexcept {
  {
    std::lock_guard lock(mu_);
    if (status_.load(std::memory_order_relaxed) != Pending) return false;
    source = source_world_rank;
    bytes = nbytes;
    status_.store(Done, std::memory_order_release);
  }
  cv_.notify_all();
  return true;
}

bool RequestState::fail(std::exception_ptr why) noexcept {
  {
    std::lock_guard lock(mu_);
    if (status_.load(std::memory_order_relaxed) != Pending) return false;
    error = std::move(why);
    status_.store(Failed, std::memory_order_release);
  }
  cv_.notify_all();
  return true;
}

bool RequestState::block_until(net::Deadline until) {
  std::unique_lock lock(mu_);
  return cv_.wait_until(lock, until, [&] { return status_.load(std::memory_order_relaxed) != Pending; });
}

}  // namespace thd::detail
