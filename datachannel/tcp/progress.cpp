// Who drives a TcpTransport's progress, and how a thread waits: spinning waiters,
// the poller (a waiter blocked in epoll_wait) and the progress thread, handing
// the sockets to one another so that one of them, and only one, is on them.
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <thread>

#include "datachannel/check.h"
#include "datachannel/net/cpu_relax.h"
#include "datachannel/tcp/tcp_transport_impl.h"
#include "tensor/log.h"

namespace thd::detail::tcp {

using net::Clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

namespace {

constexpr int kMaxEvents = 64;
// How long the progress thread stays parked after the last waiter stopped driving
// progress: a waiter that waits again soon (a ping-pong) keeps it out of its way.
constexpr microseconds kStandDown{1000};
// How often a parked progress thread looks again while waiters drive progress
// (they hand over at once when they stop with others blocked, so this is slack).
constexpr milliseconds kDrivenRecheck{5};
// Up to this many ranks a spinning waiter polls its peers' sockets directly.
constexpr int kDirectPollMaxWorld = 9;

std::string errno_text(int err) { return std::system_category().message(err); }

int64_t now_ns() { return std::chrono::duration_cast<nanoseconds>(Clock::now().time_since_epoch()).count(); }

}  // namespace

// ---- waiting: spin, then block -------------------------------------------------------

bool TcpTransport::wait(RequestState& request, net::Deadline until) {
  if (request.finished()) return true;
  // A passive waiter neither spins nor polls, and is no blocker either: blockers
  // call the progress thread back the moment a spinner stops, which in a ping-pong
  // would wake it on every round. It resumes by itself kStandDown after the last
  // spin, or finds the request's message on its next epoll round.
  if (request.passive_wait) return request.block_until(until);
  // Asked for by the caller, whatever the policy says (and not counted in it).
  if (request.yield_spin.count() > 0 && spin_yielding(request, until)) return true;
  nanoseconds budget = spin_.budget();
  for (;;) {
    if (budget.count() > 0) {
      const SpinPolicy::Outcome outcome = spin(request, until, budget);
      spin_.record_spin(outcome, outcome == SpinPolicy::Outcome::RanOut && run_queue_.busy());
      if (request.finished()) return true;
    }
    if (Clock::now() >= until) return false;
    // Block. The first blocked waiter blocks in epoll_wait itself, as the poller:
    // the message that completes its request wakes it directly (one wake-up, as a
    // blocking recv() would). Other waiters block on their requests while the
    // poller, or once it leaves the progress thread, makes progress for them.
    if (stop_.load()) break;
    // Someone polls already: often a long-lived listener (a worker's command loop)
    // while this thread waits for the message it needs next. The newest waiter
    // takes the poll over, so that message wakes it directly.
    if (poller_active_.exchange(true) && !take_over_polling(until)) break;
    // A poll that sees a frame start streaming spins again, as a waiter does
    // mid-stream (a large message whose announcement came after the spin ran out
    // would otherwise be read one epoll_wait per socket buffer). Only where
    // spinning pays now: never oversubscribed, and not during a pause.
    budget = spin_.configured_budget();
    const bool may_spin = budget.count() > 0 && !tuning_.oversubscribed && spin_.pause() == 0;
    switch (poll_until(request, until, may_spin)) {
      case PollEnd::Finished: return true;
      case PollEnd::TimedOut: return false;
      case PollEnd::Block: return block_on(request, until);
      case PollEnd::Streaming: polls_turned_to_spins_.fetch_add(1, std::memory_order_relaxed); continue;
    }
  }
  return block_on(request, until);
}

bool TcpTransport::take_over_polling(net::Deadline until) {
  // How long to wait for the poller to notice; past it, block as before.
  constexpr microseconds kHandOver{2000};
  handover_wanted_.store(true);
  if (!kicked_.exchange(true)) {
    const uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(kick_.get(), &one, sizeof(one));
  }
  const auto give_up = std::min(until, Clock::now() + kHandOver);
  while (Clock::now() < give_up && !stop_.load()) {
    if (!poller_active_.exchange(true)) {
      handover_wanted_.store(false);
      return true;
    }
    std::this_thread::yield();
  }
  handover_wanted_.store(false);
  return false;
}

bool TcpTransport::block_on(RequestState& request, net::Deadline until) {
  begin_external_wait();
  const bool finished = request.block_until(until);
  end_external_wait();
  return finished;
}

void TcpTransport::begin_external_wait() noexcept {
  blockers_.fetch_add(1);
  wake_progress_thread();
}

void TcpTransport::end_external_wait() noexcept { blockers_.fetch_sub(1); }

SpinPolicy::Outcome TcpTransport::spin(RequestState& request, net::Deadline until, nanoseconds budget) {
  using Outcome = SpinPolicy::Outcome;
  const auto gap = nanoseconds(SpinPolicy::kDescheduledGap);
  drivers_.fetch_add(1);
  Outcome outcome = Outcome::RanOut;
  auto last_useful = Clock::now();
  auto prev_end = last_useful;
  bool mid_stream = false;  // a frame is partly through one of this rank's connections
  while (!request.finished()) {
    const auto begin = Clock::now();
    size_t moved = 0;
    bool polled = false;
    bool stalled = false;
    {
      std::unique_lock lock(mu_, std::try_to_lock);
      if (lock.owns_lock()) {
        moved = poll_locked();
        polled = true;
        // Judged only after a look at the sockets of its own: another thread that
        // holds the engine may be moving this very request's bytes. A frame part
        // way through is looked up only once the budget is spent, so the quiet
        // spin of a ping-pong never pays for it.
        const nanoseconds quiet = Clock::now() - last_useful;
        if (moved == 0 && quiet > budget) {
          mid_stream = !tuning_.oversubscribed && frame_mid_stream();
          stalled = quiet > SpinPolicy::stall_limit(budget, mid_stream);
        }
      } else {
        net::cpu_relax();  // someone else is making progress
      }
    }
    // What this thread finished (a message, or a peer found lost) may be what a
    // poller blocked in epoll_wait is waiting for.
    if (polled) kick_poller_if_done();
    const auto end = Clock::now();
    // A long gap in which this thread did no work: it lost its CPU to another
    // thread, which spinning only delays.
    if (begin - prev_end > gap || (moved == 0 && end - begin > gap)) {
      outcome = Outcome::Descheduled;
      break;
    }
    prev_end = end;
    if (moved > 0) last_useful = end;
    if (end >= until || stalled) break;
  }
  if (request.finished()) outcome = Outcome::Completed;
  stop_driving();
  return outcome;
}

bool TcpTransport::spin_yielding(RequestState& request, net::Deadline until) {
  const auto end = std::min(until, Clock::now() + request.yield_spin);
  drivers_.fetch_add(1);
  while (!request.finished() && Clock::now() < end) {
    {
      std::unique_lock lock(mu_, std::try_to_lock);
      if (lock.owns_lock()) poll_locked();
    }
    kick_poller_if_done();
    if (request.finished()) break;
    // A waiter for another node's event often shares the host's cores with the
    // very threads that will produce it.
    std::this_thread::yield();
  }
  stop_driving();
  return request.finished();
}

TcpTransport::PollEnd TcpTransport::poll_until(RequestState& request, net::Deadline until, bool may_spin) {
  // A bound on one epoll_wait, in case a wake-up is ever missed: the poller then
  // looks at its request at least this often.
  constexpr milliseconds kMaxPollSleep{100};
  drivers_.fetch_add(1);
  {
    std::lock_guard lock(poll_mu_);
    poll_target_ = &request;
  }
  epoll_event events[kMaxEvents];
  bool failed = false;
  bool handed_over = false;
  bool streaming = false;
  while (!request.finished() && !stop_.load()) {
    const auto now = Clock::now();
    if (now >= until) break;
    if (handover_wanted_.load()) {
      handed_over = true;
      break;
    }
    int timeout = net::poll_timeout_ms(until);  // -1: no deadline
    if (timeout < 0 || timeout > kMaxPollSleep.count()) timeout = static_cast<int>(kMaxPollSleep.count());
    const int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      failed = true;  // cannot happen with a valid epoll fd; block on the request instead
      break;
    }
    if (n == 0) continue;
    std::lock_guard lock(mu_);
    const size_t moved = dispatch(events, n, /*as_poller=*/true);
    if (may_spin && moved > 0 && !request.finished() && frame_mid_stream()) {
      streaming = true;
      break;
    }
  }
  {
    std::lock_guard lock(poll_mu_);
    poll_target_ = nullptr;
  }
  if (kicked_.exchange(false)) drain_kick();  // a kick may have come after the poll ended
  poller_active_.store(false);
  stop_driving();
  if (request.finished()) return PollEnd::Finished;
  if (streaming) return PollEnd::Streaming;
  if (!failed && !handed_over && !stop_.load()) return PollEnd::TimedOut;  // the deadline passed
  return PollEnd::Block;
}

void TcpTransport::stop_driving() {
  last_spin_end_ns_.store(now_ns());
  if (drivers_.fetch_sub(1) == 1 && blockers_.load() > 0) wake_progress_thread();
}

void TcpTransport::kick_poller_if_done() {
  if (!poller_active_.load()) return;
  std::lock_guard lock(poll_mu_);
  if (poll_target_ != nullptr && poll_target_->finished() && !kicked_.exchange(true)) {
    const uint64_t one = 1;
    // A full counter is already a pending kick.
    [[maybe_unused]] auto n = ::write(kick_.get(), &one, sizeof(one));
  }
}

void TcpTransport::drain_kick() noexcept {
  uint64_t count;
  [[maybe_unused]] auto n = ::read(kick_.get(), &count, sizeof(count));
}

size_t TcpTransport::poll_locked() {
  // Few peers: try their sockets directly. A recv() that finds nothing costs about
  // what epoll_wait(0) does, and unlike it takes no lock that the kernel's delivery
  // of the next message to this rank needs. Many peers: one epoll_wait(0).
  if (size() <= kDirectPollMaxWorld) {
    // poll() reads readiness without the socket lock that recv() takes, so an
    // empty look does not hold up the kernel delivering the next message.
    pollfd fds[kDirectPollMaxWorld];
    Peer* owners[kDirectPollMaxWorld];
    nfds_t n = 0;
    size_t moved = 0;
    for (Peer& p : peers_) {
      if (p.rank == rank() || p.lost) continue;
      if (!p.sends.empty()) moved += write_to(p);
      if (p.lost || p.rx == Rx::Parked) continue;
      // Bytes already buffered, or a payload part way through: its next bytes are
      // due, and a poll() before every read of a streaming payload would double
      // its system calls.
      if (p.rend > p.rbegin || p.rx == Rx::IntoRecv || p.rx == Rx::IntoBuffer || p.rx == Rx::Discard) {
        moved += read_from(p);
        continue;
      }
      fds[n] = {p.socket.fd(), POLLIN | POLLRDHUP, 0};
      owners[n++] = &p;
    }
    if (n == 0 || ::poll(fds, n, 0) <= 0) return moved;
    for (nfds_t i = 0; i < n; ++i) {
      if (fds[i].revents != 0 && !owners[i]->lost) moved += read_from(*owners[i]);
    }
    return moved;
  }
  epoll_event events[kMaxEvents];
  const int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, 0);
  if (n <= 0) return 0;
  return dispatch(events, n, /*as_poller=*/false);
}

bool TcpTransport::frame_mid_stream() const {
  for (const Peer& p : peers_) {
    if (p.rank == rank() || p.lost) continue;
    if (p.rx == Rx::IntoRecv || p.rx == Rx::IntoBuffer || p.rx == Rx::Discard) return true;
    // Cleared to send: the sender writes the data the moment it sees the answer.
    if (!p.awaiting_data.empty()) return true;
    // Frames waiting for room in a full socket buffer, which the peer is draining.
    if (!p.sends.empty()) return true;
  }
  return false;
}

// ---- the progress thread ---------------------------------------------------------------

void TcpTransport::wake_progress_thread() {
  {
    std::lock_guard lock(park_mu_);
    handoff_ = true;
  }
  park_cv_.notify_one();
}

void TcpTransport::stand_down_while_driven() {
  std::unique_lock lock(park_mu_);
  for (;;) {
    if (stop_.load()) return;
    if (drivers_.load() > 0) {
      handoff_ = false;
      park_cv_.wait_for(lock, kDrivenRecheck);
      continue;
    }
    if (handoff_ || blockers_.load() > 0) break;
    const auto since = nanoseconds(now_ns() - last_spin_end_ns_.load());
    if (since >= kStandDown) break;
    park_cv_.wait_for(lock, kStandDown - since);
  }
  handoff_ = false;
}

void TcpTransport::progress_loop() noexcept {
  epoll_event events[kMaxEvents];
  while (!stop_.load()) {
    try {
      stand_down_while_driven();
      const int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        THD_THROW(ConnectionError, "tcp backend", "epoll_wait failed: {}", errno_text(errno));
      }
      // A waiter driving progress polls the same (level-triggered) events: leave
      // them to it.
      if (drivers_.load() > 0) continue;
      {
        std::lock_guard lock(mu_);
        dispatch(events, n, /*as_poller=*/false);
      }
      kick_poller_if_done();
    } catch (const std::exception& e) {
      // Nothing can drive the sockets any more: fail everything rather than hang.
      THD_LOG_ERROR("tcp backend (rank {}): the progress thread failed: {}", rank(), e.what());
      std::lock_guard lock(mu_);
      for (Peer& p : peers_) {
        if (p.rank != rank()) lose_peer(p, fmt::format("this rank's progress thread failed: {}", e.what()), false);
      }
      return;
    }
  }
}

size_t TcpTransport::dispatch(const epoll_event* events, int n, bool as_poller) {
  size_t moved = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t id = events[i].data.u64;
    if (id == kWakeId) continue;
    if (id == kKickId) {
      // The poller's; anyone else leaves it to the poller while there is one.
      if (as_poller || !poller_active_.load()) {
        kicked_.store(false);
        drain_kick();
      }
      continue;
    }
    Peer& p = peers_[static_cast<size_t>(id)];
    if (p.lost) continue;
    const uint32_t ev = events[i].events;
    if (ev & EPOLLOUT) moved += write_to(p);
    if (p.lost) continue;
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      if (p.rx != Rx::Parked) {
        moved += read_from(p);
      } else if (ev & (EPOLLHUP | EPOLLERR)) {
        lose_peer(p,
                  fmt::format("its connection was reset while {} bytes of its messages waited for receives",
                              p.buffered),
                  /*warn=*/false);
      } else if (ev & EPOLLRDHUP) {
        // It will send nothing more, and what it sent last is unread in the socket
        // behind messages no receive has taken: keep what is buffered (receivable,
        // as from any lost peer) and drop the rest with the connection.
        lose_peer(p,
                  fmt::format("it closed its connection while {} bytes of its messages waited for receives (the "
                              "limit per peer, THD_MAX_UNEXPECTED_BYTES={}) and more were unread; those are dropped",
                              p.buffered, tuning_.unexpected_limit),
                  /*warn=*/true);
      }
    }
  }
  return moved;
}

}  // namespace thd::detail::tcp
