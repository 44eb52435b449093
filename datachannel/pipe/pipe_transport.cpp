#include "datachannel/pipe/pipe_transport.h"

#include <algorithm>
#include <limits>
#include <optional>

#include <fmt/ranges.h>

#include "datachannel/check.h"
#include "datachannel/net/auth.h"
#include "datachannel/net/thread_name.h"
#include "tensor/log.h"

namespace thd::detail::pipe {

namespace {

// How long the progress thread keeps out of the way after a waiter last drove.
constexpr std::chrono::microseconds kStandDown{1000};
// How often the progress thread looks again while it stands down. Not every
// kStandDown: each look takes a core from the spinning waiters, and looking every
// millisecond cost a small message's round trip some 20 ns on two cores. So it
// resumes between kStandDownLook and twice that after the last drive (a blocked
// waiter calls it back at once).
constexpr std::chrono::milliseconds kStandDownLook{4};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(net::Clock::now().time_since_epoch()).count();
}


}  // namespace

std::shared_ptr<Transport> make_pipe_transport(std::unique_ptr<MessagePipe> pipe, const DataChannelOptions& options) {
  const std::string op = std::string(pipe->name()) + " backend";
  PipeAuth auth{net::resolve_auth_token(options.token, op), options.store, options.timeout};
  return std::make_shared<PipeTransport>(std::move(pipe), std::move(auth), pipe_tuning_for(options));
}

PipeTransport::PipeTransport(std::unique_ptr<MessagePipe> pipe, PipeAuth auth, const PipeTuning& tuning)
    : Transport(pipe->rank(), pipe->size()),
      name_(pipe->name()),
      tuning_(tuning),
      host_collectives_(pipe->host_collectives()),
      proof_(rank(), size(), std::move(auth.token)),
      liveness_(rank(), size(),
                LivenessTuning{.heartbeats = !pipe->detects_silent_peer_loss(),
                               .heartbeat_interval = tuning.heartbeat_interval,
                               .heartbeat_timeout = tuning.heartbeat_timeout},
                net::Clock::now()),
      heartbeat_out_(static_cast<size_t>(size()), nullptr),
      lost_peers_(rank(), size(), name_ + " backend"),
      engine_(std::move(pipe), tuning, proof_, liveness_, lost_peers_),
      direct_(tuning.direct_path && engine_.native() && engine_.pipe().offers_direct()) {
  THD_CHECK(auth.store != nullptr, ValueError, "DataChannel::create", "the {} backend needs the channel's store",
            name_);
  try {
    prove_token(auth);
  } catch (...) {
    // Nothing may complete into this half-made transport: the pipe goes first.
    std::lock_guard lock(mu_);
    engine_.close_pipe();
    throw;
  }
  progress_ = std::thread([this] { progress_loop(); });
}

// The handshake (token_proof.h): nonces through the store, then a hello to every
// peer as its first control message; returns once every peer proved the token.
void PipeTransport::prove_token(const PipeAuth& auth) {
  const std::string op = name_ + " backend";
  const std::vector<std::string> identities =
      proof_.exchange(*auth.store, auth.timeout, auth.identity.value_or(this_process()).encode(), op);
  for (int p = 0; p < size(); ++p) {
    if (p != rank()) liveness_.watch(p, identities[static_cast<size_t>(p)]);
  }
  std::unique_lock lock(mu_);
  engine_.open();
  for (int p = 0; p < size(); ++p) {
    if (p != rank()) engine_.send_control(p, proof_.hello_for(p), "token proof");
  }
  engine_.settle();
  const net::Deadline until = net::deadline_after(auth.timeout);
  const bool done = drive_locked(lock, until, [&] {
    for (int p = 0; p < size(); ++p) {
      if (p != rank() && !proof_.proved(p) && !proof_.refused(p) && !peer_error(p)) {
        return false;
      }
    }
    return true;
  });
  for (int p = 0; p < size(); ++p) {
    if (proof_.refused(p)) {
      THD_THROW_AT(AuthError, op, rank(), p, "{} (the ranks of one channel must hold the same token; this rank's "
                   "came from {})", proof_.refusal(p), proof_.token_source());
    }
  }
  for (int p = 0; p < size(); ++p) {
    if (p != rank() && !proof_.proved(p)) {
      if (auto lost = peer_error(p)) std::rethrow_exception(lost);
    }
  }
  if (!done) {
    std::vector<int> silent;
    for (int p = 0; p < size(); ++p) {
      if (p != rank() && !proof_.proved(p)) silent.push_back(p);
    }
    THD_THROW_AT(TimeoutError, op, rank(), silent.size() == 1 ? silent[0] : -1,
                 "no token proof from rank{} {} within {} ms", silent.size() == 1 ? "" : "s", fmt::join(silent, ", "),
                 auth.timeout.count());
  }
}

PipeTransport::~PipeTransport() {
  std::unique_lock lock(mu_);
  engine_.close();
  // Replies a worker sent last (a session's goodbye) must leave before the pipe goes.
  drive_locked(lock, net::deadline_after(tuning_.close_linger), [&] { return engine_.sends_settled(); });
  stop_.store(true);
  engine_.stop();
  engine_.pipe().interrupt();
  lock.unlock();
  if (progress_.joinable()) progress_.join();
  lock.lock();
  engine_.fail_all();
  engine_.close_pipe();
}

std::exception_ptr PipeTransport::peer_error(int world_rank) const { return lost_peers_.error(world_rank); }

bool PipeTransport::peer_departed(int world_rank) const { return lost_peers_.departed(world_rank); }

// ---- posting ------------------------------------------------------------------------

void PipeTransport::post_send(std::span<const uint8_t> data, int dst, const Envelope& envelope,
                              const std::shared_ptr<RequestState>& request) {
  std::unique_lock lock(mu_);
  engine_.post_send(data, dst, envelope, request);
  lock.unlock();
  wake_sleeper();
}

std::shared_ptr<RequestState> PipeTransport::send_blocking(std::span<const uint8_t> data, int dst,
                                                           const Envelope& envelope, const RequestMaker& make_request) {
  // Its callers tried send_now (the direct path) first.
  std::unique_lock lock(mu_);
  if (engine_.send_native_at_once(data, dst, envelope)) {
    lock.unlock();
    wake_sleeper();
    return nullptr;
  }
  // Anything but a small message to a healthy peer takes the general path, which
  // also reports what is wrong.
  if (!engine_.sends_inline(data, dst, envelope)) {
    lock.unlock();
    return Transport::send_blocking(data, dst, envelope, make_request);
  }
  // The common case first, in this frame: on a round trip's latency path, the
  // calls and arguments between here and the library's send showed.
  if (engine_.send_at_once(data, dst, envelope)) {
    lock.unlock();
    wake_sleeper();
    return nullptr;
  }
  std::shared_ptr<RequestState> request;
  std::exception_ptr error;
  const bool left = engine_.send_inline(data, dst, envelope, request, &make_request, &error);
  lock.unlock();
  wake_sleeper();
  if (left && error) {
    request = make_request();
    request->fail(std::move(error));
  }
  return request;
}

void PipeTransport::post_recv(std::span<uint8_t> data, int src, const Envelope& envelope,
                              const std::shared_ptr<RequestState>& request) {
  std::unique_lock lock(mu_);
  engine_.post_recv(data, src, envelope, request);
  lock.unlock();
  wake_sleeper();
}

int PipeTransport::recv_blocking(std::span<uint8_t> data, int src, const Envelope& envelope,
                                 const RequestSpec& spec) {
  if (direct_ && data.size() <= PipeEngine::kDirectBytes && src != kAnySource) {
    DirectRecv recv(spec, this, engine_.pipe(), data, envelope, src);
    if (post_direct(recv)) return wait_direct(recv);
  }
  // The request lives on this stack, behind a pointer that owns nothing: the
  // queues' copies of it cost no atomic count, and none outlives this call (the
  // receive is matched or withdrawn before it returns; Transport's contract).
  // RequestState::complete publishes the status last, so a finisher on another
  // thread is done with the request once this thread sees it finished.
  RequestState state(spec, this);
  const std::shared_ptr<RequestState> request(std::shared_ptr<RequestState>(), &state);
  {
    std::lock_guard lock(mu_);
    engine_.post_recv(data, src, envelope, request);
    // One round while the lock is held anyway: a message already at the library
    // is taken without the waiter's first round locking again.
    if (!state.finished() && !state.passive_wait && !engine_.closing()) engine_.drive_once();
  }
  wake_sleeper();
  try {
    Request(request).wait();
  } catch (...) {
    // The host's interrupt check ends a wait with its own exception, the receive
    // still posted: withdraw it before this frame, which holds its request, goes.
    if (!state.finished()) cancel(request, std::current_exception());
    throw;
  }
  return state.source;
}

// ---- cancel and waiting -------------------------------------------------------------

void PipeTransport::cancel(const std::shared_ptr<RequestState>& request, std::exception_ptr why) {
  std::unique_lock lock(mu_);
  engine_.cancel(request, std::move(why), driver(lock));
}

bool PipeTransport::drive_locked(std::unique_lock<EngineLock>& lock, net::Deadline until,
                                 const std::function<bool()>& finished) {
  while (!finished()) {
    if (net::Clock::now() >= until) return false;
    if (engine_.drive_once() > 0) continue;
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
  return true;
}

bool PipeTransport::wait(RequestState& request, net::Deadline until) { return spin_then_block(request, &until); }

bool PipeTransport::wait_own(RequestState& request) { return spin_then_block(request, nullptr); }

bool PipeTransport::spin_then_block(RequestState& request, const net::Deadline* until, bool sole_waiter) {
  // A caller's yield_spin (P2POptions) lengthens the spin and makes it yield.
  const auto spin_budget = std::max<std::chrono::microseconds>(tuning_.spin_budget, request.yield_spin);
  const bool yield_while_spinning = tuning_.yield_while_spinning || request.yield_spin.count() > 0;
  // The host's yield backs off while yielding gives nothing away; a caller's
  // yield_spin yields every round, as asked.
  const bool adaptive_yield = request.yield_spin.count() == 0;
  if (!request.passive_wait && spin_budget.count() > 0) {
    // Set at the first look at the clock, a few rounds in: most waits of a
    // ping-pong end before it, and a clock read here costs as much as two rounds.
    std::optional<net::Deadline> spin_end;
    bool drove = false;
    // While a waiter drives the pipe the progress thread stands down: two threads
    // taking turns on one library cost each other the lock and the cores. The
    // waiter says it drives by moving drive_marks_, often, with plain stores: a
    // count of drivers cost two atomic read-modify-writes a wait, one of them
    // between a message's arrival and its answer.
    mark_drive();
    // The clock is read every few rounds: a round of an idle library costs less
    // than reading it.
    unsigned idle_rounds = 0;
    for (unsigned round = 0; !request.finished(); ++round) {
      if ((round & 15U) == 15U) {
        const net::Deadline now = net::Clock::now();
        if (!spin_end) spin_end = std::min(until != nullptr ? *until : request.deadline(now), now + spin_budget);
        if (now >= *spin_end) break;
        mark_drive();
      }
      // A thread waiting for the lock goes first (engine_lock.h): taken back at
      // once, it would starve that thread, the progress thread's heartbeats among
      // them. On a host with more ranks than cores it may need this core to run.
      // Another waiter that spins meanwhile finds its request finished by this
      // one's rounds.
      if (mu_.wanted()) {
        if (yield_while_spinning) std::this_thread::yield();
        continue;
      }
      std::unique_lock lock(mu_, std::try_to_lock);
      if (!lock.owns_lock() || engine_.closing()) continue;
      drove = true;
      request.finished_by_its_waiter = sole_waiter;
      int n = engine_.drive_once();
      // A request only this thread waits for: the lock is kept for the rounds up
      // to the next clock read or the next yield, and given up at once to a thread
      // that asks for it (wanted). A try-lock and an unlock every round (two locked
      // instructions) lengthen the round, and a message waits half a round on
      // average before a round sees it: on ucx's 8-byte round trip, keeping the
      // lock took about 0.05 off the ratio to ucx_perftest.
      const unsigned yield_every =
          !yield_while_spinning ? std::numeric_limits<unsigned>::max() : adaptive_yield ? yield_backoff_.every() : 1U;
      if (sole_waiter) {
        while (n == 0 && idle_rounds + 1 < yield_every && !request.finished() && ((round + 1) & 15U) != 15U &&
               !mu_.wanted() && !engine_.closing()) {
          ++round;
          ++idle_rounds;
          n = engine_.drive_once();
        }
      }
      request.finished_by_its_waiter = false;
      lock.unlock();
      if (n == 0 && yield_while_spinning && ++idle_rounds >= yield_every) {
        idle_rounds = 0;
        yield_core(adaptive_yield);
      }
    }
    // A mark, not a time: a clock read here sat on every round trip's latency path.
    mark_drive();
    if (request.finished()) return true;
    // The progress thread may have armed before this thread consumed the library's
    // events: let it look again before this thread sleeps.
    if (drove) wake_sleeper();
  }
  // A blocked waiter needs the progress thread now.
  begin_external_wait();
  const bool finished = request.block_until(until != nullptr ? *until : request.deadline());
  end_external_wait();
  return finished;
}

void PipeTransport::begin_external_wait() noexcept {
  blockers_.fetch_add(1, std::memory_order_acq_rel);
  {
    std::lock_guard park(park_mu_);
  }
  park_cv_.notify_one();
}

void PipeTransport::end_external_wait() noexcept { blockers_.fetch_sub(1, std::memory_order_acq_rel); }

void PipeTransport::yield_core(bool adaptive) noexcept {
  if (!adaptive) {
    std::this_thread::yield();
    return;
  }
  const auto before = net::Clock::now();
  std::this_thread::yield();
  yield_backoff_.record(net::Clock::now() - before);
}

void PipeTransport::wake_sleeper() noexcept {
  // One interrupt wakes the sleeper for everything posted since: the posts that
  // follow before it runs (on a busy host, many) need not each make a syscall.
  if (sleeping_.load(std::memory_order_acquire) && sleeping_.exchange(false, std::memory_order_acq_rel)) {
    engine_.pipe().interrupt();
  }
}

void PipeTransport::tend_peers(net::Clock::time_point now, bool look_at_processes) {
  if (engine_.closing()) return;
  const std::string op = name_ + " backend";
  if (liveness_.heartbeats()) {
    auto round = liveness_.heartbeat_round(now, [&](int p) { return proof_.proved(p) && !peer_error(p); });
    if (round) {
      for (auto& lost : round->lost) {
        engine_.lose_peer(lost.peer, error_at<PeerLost>(op, rank(), lost.peer, "{}", lost.why));
      }
      for (int p : round->send_to) {
        // One heartbeat in flight per peer: a send the library cannot finish (a dead
        // peer) is not piled on. The request is held, not only its address: a
        // finished heartbeat's address comes back for the next one to another peer,
        // which would then look like this peer's heartbeat still in flight.
        auto& out = heartbeat_out_[static_cast<size_t>(p)];
        if (out != nullptr && engine_.in_flight(out.get())) continue;
        const auto beat = Liveness::heartbeat();
        out = engine_.send_control(p, std::vector<uint8_t>(beat.begin(), beat.end()), "heartbeat");
      }
      engine_.settle();
    }
  }
  if (look_at_processes) {
    for (auto& lost : liveness_.exits(now, /*look=*/true, [&](int p) { return peer_error(p) != nullptr; })) {
      engine_.lose_peer(lost.peer, error_at<PeerLost>(op, rank(), lost.peer, "{}", lost.why));
    }
    engine_.settle();
  }
}

void PipeTransport::mark_drive() noexcept {
  // Not an atomic increment: waiters racing here may lose a step, and any change
  // is all the progress thread looks for.
  drive_marks_.store(drive_marks_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

bool PipeTransport::stand_down() noexcept {
  // A blocked waiter needs this thread whoever else drives.
  if (blockers_.load(std::memory_order_acquire) > 0) return false;
  // A mark since the last look restarts the stand-down: it lasts at least
  // kStandDown after a waiter last drove, and until the next look.
  const int64_t now = now_ns();
  const uint64_t marks = drive_marks_.load(std::memory_order_acquire);
  if (marks != marks_seen_) {
    marks_seen_ = marks;
    stand_down_since_ns_ = now;
  }
  return now - stand_down_since_ns_ < kStandDown.count() * 1000;
}

void PipeTransport::progress_loop() noexcept {
  net::name_this_thread(name_ + "-progress");
  const bool heartbeats = liveness_.heartbeats();
  const bool watching = liveness_.watching();
  auto due = [&](net::Clock::time_point now) { return liveness_.look_due(now); };
  while (!stop_.load()) {
    bool armed = false;
    bool busy = false;
    if (stand_down()) {
      // A waiter drives, or did a moment ago and will again soon (a ping-pong):
      // stay out of its way, and leave the library unarmed so that its peers need
      // not signal this process on every message. Bounded, for heartbeats: waiters
      // that keep the pipe busy for longer than the heartbeat timeout (a rank
      // ping-ponging with one peer) must still be heard by the others, and this
      // rank must still notice the others going silent. tend_peers returns at once
      // when nothing is due.
      if (heartbeats || watching) {
        const auto now = net::Clock::now();
        if (const bool look = due(now); heartbeats || look) {
          std::lock_guard lock(mu_);
          tend_peers(now, look);
        }
      }
      std::unique_lock park(park_mu_);
      park_cv_.wait_for(park, kStandDownLook, [&] { return !stand_down() || stop_.load(); });
      continue;
    }
    {
      std::lock_guard lock(mu_);
      const int n = engine_.drive_once();
      if (heartbeats || watching) {
        const auto now = net::Clock::now();
        tend_peers(now, due(now));
      }
      if (n > 0) continue;
      // Never asleep with a control receive left unposted: some libraries (a
      // libfabric completion queue) wake a sleeper only for posted receives.
      if (engine_.reposts_pending()) continue;
      busy = engine_.busy();
      armed = engine_.pipe().arm();
      if (armed) sleeping_.store(true, std::memory_order_release);
    }
    if (!armed) continue;
    const auto nap = liveness_.nap(std::chrono::milliseconds(100));
    if (!stop_.load()) engine_.pipe().sleep(net::Clock::now() + nap, busy);
    sleeping_.store(false, std::memory_order_release);
  }
}

}  // namespace thd::detail::pipe
