// PipeTransport's direct path (pipe_transport.h): small blocking sends and
// receives of messages the library matches itself, straight to the pipe.
#include <thd/interrupt.h>

#include "datachannel/check.h"
#include "datachannel/pipe/pipe_transport.h"

namespace thd::detail::pipe {

bool PipeTransport::send_direct(std::span<const uint8_t> data, int dst, const Envelope& envelope) {
  if (!direct_ || data.size() > PipeEngine::kDirectBytes) return false;
  {
    std::lock_guard lock(mu_);
    if (!engine_.direct_send_allowed(dst) || !engine_.pipe().send_direct(dst, envelope, data)) return false;
    ++direct_counts_.sends;
  }
  wake_sleeper();
  return true;
}

bool PipeTransport::post_direct(DirectRecv& recv) {
  {
    std::lock_guard lock(mu_);
    if (!engine_.direct_recv_allowed(recv.source()) ||
        !engine_.pipe().recv_direct(recv.source(), recv.envelope(), recv.data(), recv.tags(), &recv)) {
      return false;
    }
    ++direct_counts_.recvs;
    // One round while the lock is held anyway, as recv_blocking's general path.
    if (!recv.state.finished() && !recv.state.passive_wait) engine_.drive_once();
  }
  wake_sleeper();
  return true;
}

int PipeTransport::wait_direct(DirectRecv& recv) {
  RequestState& state = recv.state;
  if (!state.finished()) {
    // Nothing may leave this frame with the receive still posted: the pipe holds
    // its op, and the library the caller's memory.
    try {
      // Without an interrupt check the wait is this transport's own spin, on a
      // request only this thread waits for (wait_own_interruptibly otherwise).
      const bool finished =
          interrupt_check_installed() ? wait_own_interruptibly(state) : spin_then_block(state, nullptr, true);
      if (!finished) {
        withdraw_direct(recv, error_at<TimeoutError>(state.op, state.rank, -1, "did not complete before its deadline"));
      }
    } catch (...) {
      withdraw_direct(recv, std::current_exception());
      throw;
    }
  }
  if (state.status() == RequestState::Failed) std::rethrow_exception(state.error);
  return state.source;
}

void PipeTransport::withdraw_direct(DirectRecv& recv, std::exception_ptr why) {
  std::unique_lock lock(mu_);
  if (recv.state.finished()) return;
  if (engine_.pipe().cancel(&recv)) {
    recv.state.fail(std::move(why));
    return;
  }
  // The library matched it already (a rendezvous under way): its bytes land in
  // the caller's memory, so it should end before this returns. A sender that
  // does not finish it in time is lost, and the forced close of its endpoint
  // ends it; should even that not, the pipe forgets the op, which lives in this
  // caller's frame.
  auto ended = [&] { return recv.state.finished(); };
  const int peer = recv.source();
  if (drive_locked(lock, net::deadline_after(tuning_.withdraw_wait), ended)) return;
  engine_.lose_peer(peer, error_at<TimeoutError>(recv.state.op, rank(), peer,
                                                 "a withdrawn receive from rank {} did not finish within {} ms", peer,
                                                 tuning_.withdraw_wait.count()));
  engine_.settle();
  if (drive_locked(lock, net::deadline_after(tuning_.close_linger), ended)) return;
  engine_.pipe().forget(&recv);
  recv.state.fail(std::move(why));
}

PipeTransport::DirectCounts PipeTransport::direct_counts() const {
  std::lock_guard lock(mu_);
  return direct_counts_;
}

}  // namespace thd::detail::pipe
