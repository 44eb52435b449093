#include "datachannel/request_state.h"

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace thd::detail {

namespace {

// Where blocked waiters sleep: a stripe per request address. A finisher wakes its
// whole stripe; the others see their request still pending and sleep again.
struct ParkingStripe {
  std::mutex mu;
  std::condition_variable cv;
};
constexpr size_t kStripes = 64;

ParkingStripe& stripe_of(const void* request) {
  // Never destroyed: a thread may block on a request while the process exits.
  static ParkingStripe* const stripes = new ParkingStripe[kStripes];
  return stripes[(reinterpret_cast<uintptr_t>(request) >> 6) % kStripes];
}

}  // namespace

bool RequestState::complete(int source_world_rank, size_t nbytes) noexcept {
  if (!claim()) return false;
  source = source_world_rank;
  bytes = nbytes;
  publish(Done);
  return true;
}

bool RequestState::fail(std::exception_ptr why) noexcept {
  if (!claim()) return false;
  error = std::move(why);
  publish(Failed);
  return true;
}

void RequestState::publish(int status) noexcept {
  status_.store(status, std::memory_order_seq_cst);
  if (blocked_.load(std::memory_order_seq_cst) == 0) return;
  // A waiter between its check of status_ and its sleep holds the stripe's mutex:
  // taking it here means the notify cannot fall in that gap.
  ParkingStripe& stripe = stripe_of(this);
  { std::lock_guard lock(stripe.mu); }
  stripe.cv.notify_all();
}

bool RequestState::block_until(net::Deadline until) {
  if (finished()) return true;
  blocked_.fetch_add(1, std::memory_order_seq_cst);
  bool finished_now;
  {
    ParkingStripe& stripe = stripe_of(this);
    std::unique_lock lock(stripe.mu);
    finished_now =
        stripe.cv.wait_until(lock, until, [&] { return status_.load(std::memory_order_seq_cst) != Pending; });
  }
  blocked_.fetch_sub(1, std::memory_order_seq_cst);
  return finished_now;
}

}  // namespace thd::detail
