#include "datachannel/request_state.h"

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

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

std::optional<bool> RequestState::claim() noexcept {
  uint32_t s = state_.load(std::memory_order_relaxed);
  do {
    if ((s & kStatusMask) != Pending) return std::nullopt;
  } while (!state_.compare_exchange_weak(s, (s & kBlockedBit) | kClaimed, std::memory_order_acq_rel,
                                         std::memory_order_relaxed));
  return (s & kBlockedBit) != 0;
}

net::Deadline RequestState::fix_deadline(net::Deadline now) const noexcept {
  // As net::deadline_after: saturating, so that milliseconds::max() is "never".
  return fix_deadline_at(
      timeout_from_wait_ >= std::chrono::duration_cast<std::chrono::milliseconds>(net::Deadline::max() - now)
          ? net::Deadline::max()
          : now + timeout_from_wait_);
}

net::Deadline RequestState::fix_deadline_coarsely() const noexcept {
  return fix_deadline_at(net::coarse_deadline_after(timeout_from_wait_));
}

net::Deadline RequestState::fix_deadline_at(net::Deadline at) const noexcept {
  net::Clock::rep expected = kUnfixed;
  // The first to fix it wins: every waiter then times out at the same moment.
  if (deadline_at_.compare_exchange_strong(expected, at.time_since_epoch().count(), std::memory_order_relaxed)) {
    return at;
  }
  return net::Deadline(net::Clock::duration(expected));
}

bool RequestState::complete(int source_world_rank, size_t nbytes) noexcept {
  if (finished_by_its_waiter) {
    if ((state_.load(std::memory_order_relaxed) & kStatusMask) != Pending) return false;
    source = source_world_rank;
    bytes = nbytes;
    const uint32_t lane = on_finish;
    state_.store(Done, std::memory_order_release);
    if (lane != 0) collective_lane_request_finished(lane);
    return true;
  }
  const std::optional<bool> waiters = claim();
  if (!waiters) return false;
  source = source_world_rank;
  bytes = nbytes;
  publish(Done, *waiters);
  return true;
}

bool RequestState::fail(std::exception_ptr why) noexcept {
  const std::optional<bool> waiters = claim();
  if (!waiters) return false;
  error = std::move(why);
  publish(Failed, *waiters);
  return true;
}

void RequestState::publish(int status, bool waiters) noexcept {
  // Read first: once the status is out, a waiter may drop the request.
  const uint32_t lane = on_finish;
  state_.store(static_cast<uint32_t>(status), std::memory_order_release);
  if (waiters) {
    // A waiter between its check of the status and its sleep holds the stripe's
    // mutex: taking it here means the notify cannot fall in that gap. (The stripe
    // comes from the request's address alone.)
    ParkingStripe& stripe = stripe_of(this);
    { std::lock_guard lock(stripe.mu); }
    stripe.cv.notify_all();
  }
  if (lane != 0) collective_lane_request_finished(lane);
}

bool RequestState::block_until(net::Deadline until) {
  // Mark the request as waited on, while it is still Pending: a finisher that
  // claims it afterwards sees the mark and wakes this thread. One that claimed it
  // first is writing its fields this moment; wait for it here.
  uint32_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    const uint32_t status = s & kStatusMask;
    if (status == Done || status == Failed) return true;
    if (status == kClaimed) {
      if (net::Clock::now() >= until) return false;
      std::this_thread::yield();
      s = state_.load(std::memory_order_acquire);
      continue;
    }
    if ((s & kBlockedBit) != 0 ||
        state_.compare_exchange_weak(s, s | kBlockedBit, std::memory_order_acq_rel, std::memory_order_acquire)) {
      break;
    }
  }
  ParkingStripe& stripe = stripe_of(this);
  std::unique_lock lock(stripe.mu);
  return stripe.cv.wait_until(lock, until, [&] { return finished(); });
}

}  // namespace thd::detail
