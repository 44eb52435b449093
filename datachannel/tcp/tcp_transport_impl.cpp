#include "datachannel/tcp/tcp_transport_impl.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include "datachannel/check.h"
#include "datachannel/net/thread_name.h"
#include "datachannel/transport_options.h"
#include "tensor/env_setting.h"
#include "tensor/log.h"

namespace thd::detail::tcp {

using net::Clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

std::string errno_text(int err) { return std::system_category().message(err); }

}  // namespace

TcpTransport::TcpTransport(int rank, int size, Mesh mesh, const Tuning& tuning)
    : Transport(rank, size),
      tuning_(tuning),
      spin_(tuning.spin_budget, tuning.oversubscribed),
      run_queue_(tuning.cpus),
      peers_(static_cast<size_t>(size)),
      lost_flags_(static_cast<size_t>(size)),
      departed_flags_(static_cast<size_t>(size)),
      lost_errors_(static_cast<size_t>(size)) {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  THD_CHECK(epoll_.valid(), ConnectionError, "tcp backend", "epoll_create1 failed: {}", errno_text(errno));
  wake_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  THD_CHECK(wake_.valid(), ConnectionError, "tcp backend", "eventfd failed: {}", errno_text(errno));
  auto add = [&](int fd, uint32_t events, uint64_t id) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = id;
    THD_CHECK(::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) == 0, ConnectionError, "tcp backend",
              "epoll_ctl failed: {}", errno_text(errno));
  };
  kick_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  THD_CHECK(kick_.valid(), ConnectionError, "tcp backend", "eventfd failed: {}", errno_text(errno));
  add(wake_.get(), EPOLLIN, kWakeId);
  add(kick_.get(), EPOLLIN, kKickId);
  for (int r = 0; r < size; ++r) {
    Peer& p = peers_[static_cast<size_t>(r)];
    p.rank = r;
    if (r == rank) continue;
    p.socket = std::move(mesh.peers[static_cast<size_t>(r)]);
    if (tuning.socket_buffer_bytes > 0) {
      // Best effort: a socket that keeps the kernel's sizing still works.
      const int bytes = static_cast<int>(tuning.socket_buffer_bytes);
      (void)::setsockopt(p.socket.fd(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
      (void)::setsockopt(p.socket.fd(), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
    }
    p.rbuf = std::make_unique_for_overwrite<uint8_t[]>(kReadBufferBytes);
    p.interest = EPOLLIN | EPOLLRDHUP;
    add(p.socket.fd(), p.interest, static_cast<uint64_t>(r));
  }
  progress_ = std::thread([this] {
    net::name_this_thread("thd-tcp-prog");
    progress_loop();
  });
}

TcpTransport::~TcpTransport() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;  // posts from now on fail
    // Behind everything already queued to each peer: it tells them this rank
    // finished, so its end-of-stream is a departure, not a death.
    for (Peer& p : peers_) {
      if (p.rank != rank() && !p.lost && p.socket.valid()) queue_control(p, FrameKind::Goodbye, 0);
    }
  }
  // Queued sends get a bounded time to reach the kernel; the progress thread (not
  // parked: nobody spins any more) keeps reading meanwhile, so two ranks closing
  // at once both drain.
  const auto linger_end = Clock::now() + tuning_.close_linger;
  wake_progress_thread();
  for (;;) {
    {
      std::lock_guard lock(mu_);
      // Announced messages too: their receivers may still ask for them.
      const bool drained = std::all_of(peers_.begin(), peers_.end(),
                                       [](const Peer& p) { return p.sends.empty() && p.announced.empty(); });
      if (drained) break;
    }
    if (Clock::now() >= linger_end) {
      THD_LOG_WARN("tcp backend (rank {}): closing with sends still queued after {} ms; they are dropped", rank(),
                   tuning_.close_linger.count());
      break;
    }
    std::this_thread::sleep_for(milliseconds(1));
  }
  // Then until this rank's kernel has transmitted what it still holds: closing a
  // socket with unread input resets the connection and drops output not yet sent,
  // which would lose messages whose sends have already completed. (Transmitted is
  // enough: a reset does not take back what the peer's kernel has received.)
  for (;;) {
    bool transmitted = true;
    {
      std::lock_guard lock(mu_);
      for (const Peer& p : peers_) {
        int unsent = 0;
        if (!p.lost && p.socket.valid() && ::ioctl(p.socket.fd(), SIOCOUTQNSD, &unsent) == 0 && unsent > 0) {
          transmitted = false;
        }
      }
    }
    if (transmitted || Clock::now() >= linger_end) break;
    std::this_thread::sleep_for(milliseconds(1));
  }
  stop_.store(true);
  const uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_.get(), &one, sizeof(one));
  wake_progress_thread();
  progress_.join();

  std::lock_guard lock(mu_);
  for (const PostedRecv& r : queues_.withdraw_if([](const PostedRecv&) { return true; })) {
    r.request->fail(closed_error(r.request->op));
  }
  for (Peer& p : peers_) {
    if (p.rx == Rx::IntoRecv) p.target.request->fail(closed_error(p.target.request->op));
    for (SendOp& op : p.sends) {
      if (op.request) op.request->fail(closed_error(op.request->op));
    }
    p.sends.clear();
    fail_rendezvous(p, [&](const RequestState& r) { return closed_error(r.op); });
  }
  // The sockets close with peers_.
}

// ---- public operations -------------------------------------------------------------

void TcpTransport::post_send(std::span<const uint8_t> data, int dst, const Envelope& envelope,
                             const std::shared_ptr<RequestState>& request) {
  std::unique_lock lock(mu_);
  if (closing_) {
    request->fail(closed_error(request->op));
    return;
  }
  if (dst < 0 || dst >= size() || data.size() > kMaxPayloadBytes) {
    try {
      THD_THROW_AT(ValueError, request->op, rank(), dst, "cannot send {} bytes to rank {} of a world of {}",
                   data.size(), dst, size());
    } catch (...) {
      request->fail(std::current_exception());
    }
    return;
  }
  if (dst == rank()) {
    send_to_self(data, envelope, request);  // may finish the poller's receive
    lock.unlock();
    kick_poller_if_done();
    return;
  }
  Peer& p = peers_[static_cast<size_t>(dst)];
  if (p.lost) {
    request->fail(lost_error(p, request->op));
    return;
  }
  SendOp op;
  op.request = request;
  op.nbytes = data.size();
  if (!data.empty() && data.size() >= tuning_.rendezvous_bytes) {
    // Large: announce it; the payload leaves when the receiver asks for it.
    op.kind = FrameKind::ReadyToSend;
    op.rendezvous_id = p.next_rendezvous_id++;
    op.header = encode_frame_header(envelope, data.size(), FrameKind::ReadyToSend, op.rendezvous_id);
    op.announced = data;
  } else if (fits_small_header(envelope)) {
    write_small_header(op.header.data(), envelope);
    op.header_size = kSmallHeaderBytes;
    op.payload = data;
  } else {
    op.header = encode_frame_header(envelope, data.size());
    op.payload = data;
  }
  p.sends.push_back(std::move(op));
  // An empty queue means nothing is waiting for EPOLLOUT: write now, from this
  // thread. Otherwise the frame joins the queue and leaves with the others.
  if (p.sends.size() == 1) write_to(p);
}

void TcpTransport::post_recv(std::span<uint8_t> data, int src, const Envelope& envelope,
                             const std::shared_ptr<RequestState>& request) {
  std::lock_guard lock(mu_);
  if (closing_) {
    request->fail(closed_error(request->op));
    return;
  }
  if (src != kAnySource && (src < 0 || src >= size())) {
    try {
      THD_THROW_AT(ValueError, request->op, rank(), src, "cannot receive from rank {} of a world of {}", src,
                   size());
    } catch (...) {
      request->fail(std::current_exception());
    }
    return;
  }
  PostedRecv recv{request, data, src, envelope};
  if (UnexpectedMessage* m = queues_.find_unexpected(src, envelope)) {
    take_unexpected(m, std::move(recv));
    return;
  }
  // Messages a lost peer sent before it went are still delivered (above); nothing
  // more will come from it.
  if (src != kAnySource && src != rank() && peers_[static_cast<size_t>(src)].lost) {
    request->fail(lost_error(peers_[static_cast<size_t>(src)], request->op));
    return;
  }
  queues_.post(std::move(recv));
}

void TcpTransport::cancel(const std::shared_ptr<RequestState>& request, std::exception_ptr why) {
  cancel_locked(request, std::move(why));
  kick_poller_if_done();  // the request cancelled may be the one the poller waits for
}

void TcpTransport::cancel_locked(const std::shared_ptr<RequestState>& request, std::exception_ptr why) {
  std::lock_guard lock(mu_);
  if (request->finished()) return;
  if (auto posted = queues_.withdraw(request.get())) {
    request->fail(why);
    return;
  }
  for (Peer& p : peers_) {
    for (auto& [id, recv] : p.awaiting_data) {
      if (recv.request == request) {
        // Asked for already: its data will come and goes nowhere.
        recv.request = nullptr;
        request->fail(why);
        return;
      }
    }
    if (p.rx == Rx::IntoRecv && p.target.request == request) {
      // Mid-payload: the rest of the message goes nowhere, the stream stays in step.
      p.discard_left = p.frame.payload_bytes - p.target_done;
      p.target = {};
      p.rx = Rx::Discard;
      request->fail(why);
      return;
    }
    if (cancel_send(p, request, why)) return;
  }
  request->fail(why);
}

bool TcpTransport::cancel_send(Peer& p, const std::shared_ptr<RequestState>& request, const std::exception_ptr& why) {
  // A frame larger than this that was cancelled mid-write closes the connection
  // instead of being copied to finish it.
  constexpr size_t kMaxCancelCopy = size_t{64} << 20;
  for (auto a = p.announced.begin(); a != p.announced.end(); ++a) {
    if (a->second.request != request) continue;
    // Announced and not asked for yet: withdrawn. (Asked for meanwhile: the
    // receiver drops the ClearToSend's answer; see on_rendezvous_frame.)
    const uint64_t id = a->first;
    p.announced.erase(a);
    request->fail(why);
    queue_control(p, FrameKind::Revoke, id);
    return true;
  }
  auto it = std::find_if(p.sends.begin(), p.sends.end(), [&](const SendOp& op) { return op.request == request; });
  if (it == p.sends.end()) return false;
  if (it->header_sent == 0) {
    // Never on the wire: gone. The data of a message that was asked for is
    // replaced by its revocation, so the receiver does not wait for it.
    const bool was_data = it->kind == FrameKind::Data;
    const uint64_t id = it->rendezvous_id;
    p.sends.erase(it);
    request->fail(why);
    if (was_data) {
      queue_control(p, FrameKind::Revoke, id);
    } else {
      update_interest(p);
    }
    return true;
  }
  if (it->kind == FrameKind::ReadyToSend) {
    // Half an announcement is out: it is finished (it has no payload), then revoked.
    request->fail(why);
    queue_control(p, FrameKind::Revoke, it->rendezvous_id);
    return true;
  }
  // Part of the frame is on the wire: the rest must follow or the stream breaks.
  // A request whose keepalive holds its memory is finished from there; raw memory
  // (the caller's to free once the request fails) is copied first.
  if (!request->keeps_memory()) {
    const auto rest = it->payload.subspan(it->payload_sent);
    if (rest.size() > kMaxCancelCopy) {
      request->fail(why);
      lose_peer(p,
                fmt::format("a send of {} bytes to it was cancelled mid-message and is too large to finish "
                            "from a copy; the connection was closed to keep the stream in step",
                            it->nbytes),
                /*warn=*/true);
      return true;
    }
    it->owned = std::make_unique_for_overwrite<uint8_t[]>(std::max<size_t>(rest.size(), 1));
    std::copy(rest.begin(), rest.end(), it->owned.get());
    it->payload = std::span<const uint8_t>(it->owned.get(), rest.size());
    it->payload_sent = 0;
  }
  request->fail(why);
  return true;
}

std::exception_ptr TcpTransport::peer_error(int world_rank) const {
  if (world_rank < 0 || world_rank >= size()) return nullptr;
  if (!lost_flags_[static_cast<size_t>(world_rank)].load(std::memory_order_acquire)) return nullptr;
  std::lock_guard lock(lost_mu_);
  return lost_errors_[static_cast<size_t>(world_rank)];
}

bool TcpTransport::peer_departed(int world_rank) const {
  if (world_rank < 0 || world_rank >= size()) return false;
  return departed_flags_[static_cast<size_t>(world_rank)].load(std::memory_order_acquire);
}

size_t TcpTransport::unexpected_bytes(int world_rank) const {
  if (world_rank < 0 || world_rank >= size()) return 0;
  std::lock_guard lock(mu_);
  return peers_[static_cast<size_t>(world_rank)].buffered;
}

std::pair<size_t, size_t> TcpTransport::socket_buffers(int world_rank) const {
  if (world_rank < 0 || world_rank >= size() || world_rank == rank()) return {0, 0};
  std::lock_guard lock(mu_);
  const Peer& p = peers_[static_cast<size_t>(world_rank)];
  int snd = 0, rcv = 0;
  socklen_t len = sizeof(int);
  if (p.lost || ::getsockopt(p.socket.fd(), SOL_SOCKET, SO_SNDBUF, &snd, &len) != 0) return {0, 0};
  len = sizeof(int);
  if (::getsockopt(p.socket.fd(), SOL_SOCKET, SO_RCVBUF, &rcv, &len) != 0) return {0, 0};
  return {static_cast<size_t>(snd), static_cast<size_t>(rcv)};
}

// ---- faults ----------------------------------------------------------------------------

std::exception_ptr TcpTransport::lost_error(const Peer& p, const std::string& op) const {
  try {
    THD_THROW_AT(PeerLost, op, rank(), p.rank, "rank {} is lost: {}", p.rank, p.lost_why);
  } catch (...) {
    return std::current_exception();
  }
}

std::exception_ptr TcpTransport::closed_error(const std::string& op) const {
  try {
    THD_THROW_AT(ConnectionError, op, rank(), -1, "channel closed (the tcp transport was destroyed)");
  } catch (...) {
    return std::current_exception();
  }
}

void TcpTransport::lose_peer(Peer& p, std::string why, bool warn) {
  if (p.lost) return;
  p.lost_why = std::move(why);
  p.lost = lost_error(p, "tcp backend");
  if (warn) {
    THD_LOG_WARN("tcp backend (rank {}): dropped rank {}: {}", rank(), p.rank, p.lost_why);
  } else {
    THD_LOG_DEBUG("tcp backend (rank {}): lost rank {}: {}", rank(), p.rank, p.lost_why);
  }
  {
    std::lock_guard lock(lost_mu_);
    lost_errors_[static_cast<size_t>(p.rank)] = p.lost;
  }
  lost_flags_[static_cast<size_t>(p.rank)].store(true, std::memory_order_release);
  if (p.socket.valid()) {
    epoll_event unused{};
    (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, p.socket.fd(), &unused);
    p.socket.close();
  }
  // Everything that needs this peer fails; messages it finished sending stay
  // receivable, and any-source receives wait for other senders.
  if (p.rx == Rx::IntoRecv) p.target.request->fail(lost_error(p, p.target.request->op));
  p.target = {};
  p.entry = nullptr;
  p.rx = Rx::Header;
  p.rbegin = p.rend = 0;
  const int lost_rank = p.rank;
  // An announcement's data can no longer come.
  queues_.erase_unexpected_if(
      [&](const UnexpectedMessage& m) { return m.source == lost_rank && (!m.complete() || m.announced()); });
  for (const PostedRecv& r : queues_.withdraw_if([&](const PostedRecv& r) { return r.source == lost_rank; })) {
    r.request->fail(lost_error(p, r.request->op));
  }
  for (SendOp& op : p.sends) {
    if (op.request) op.request->fail(lost_error(p, op.request->op));
  }
  p.sends.clear();
  fail_rendezvous(p, [&](const RequestState& r) { return lost_error(p, r.op); });
}

void TcpTransport::fail_rendezvous(Peer& p, const std::function<std::exception_ptr(const RequestState&)>& why) {
  for (auto& [id, op] : p.announced) op.request->fail(why(*op.request));
  p.announced.clear();
  for (auto& [id, recv] : p.awaiting_data) {
    if (recv.request) recv.request->fail(why(*recv.request));
  }
  p.awaiting_data.clear();
}

// ---- construction ------------------------------------------------------------------------

namespace {

// The largest THD_TCP_RENDEZVOUS_BYTES: 1 TiB (in effect, never).
constexpr uint64_t kMaxRendezvousSetting = uint64_t{1} << 40;

std::optional<uint64_t> parse_rendezvous_bytes(const std::optional<std::string>& value) {
  const WholeNumberSetting setting{.name = "THD_TCP_RENDEZVOUS_BYTES",
                                   .min = 1,
                                   .max = kMaxRendezvousSetting,
                                   .unit = "bytes",
                                   .min_note = "every message by rendezvous"};
  return parse_whole_number(setting, value, "tcp backend");
}

// The largest THD_TCP_SOCKET_BUFFER_BYTES: 1 GiB (setsockopt takes an int, and
// the kernel doubles it).
constexpr uint64_t kMaxSocketBufferSetting = uint64_t{1} << 30;

std::optional<uint64_t> parse_socket_buffer_bytes(const std::optional<std::string>& value) {
  const WholeNumberSetting setting{.name = "THD_TCP_SOCKET_BUFFER_BYTES",
                                   .max = kMaxSocketBufferSetting,
                                   .unit = "bytes",
                                   .min_note = "the kernel's autotuning"};
  return parse_whole_number(setting, value, "tcp backend");
}

// The smaller of net.core.wmem_max and net.core.rmem_max: the kernel clamps
// SO_SNDBUF and SO_RCVBUF to them. Zero when they cannot be read.
size_t socket_buffer_limit() {
  size_t limit = SIZE_MAX;
  for (const char* path : {"/proc/sys/net/core/wmem_max", "/proc/sys/net/core/rmem_max"}) {
    std::ifstream in(path);
    size_t v = 0;
    if (!(in >> v)) return 0;
    limit = std::min(limit, v);
  }
  return limit;
}

bool is_loopback(const std::string& host) {
  return host.starts_with("127.") || host == "localhost" || host == "::1" || host == "[::1]";
}

}  // namespace

Tuning tuning_for(const DataChannelOptions& options, const net::EnvLookup& env) {
  Tuning t;
  t.spin_budget = parse_spin_us(env("THD_TCP_SPIN_US")).value_or(kDefaultSpinBudget);
  t.rendezvous_bytes = parse_rendezvous_bytes(env("THD_TCP_RENDEZVOUS_BYTES")).value_or(kDefaultRendezvousBytes);
  t.unexpected_limit = max_unexpected_bytes("tcp backend", kDefaultUnexpectedLimit, env);
  const int cpus = usable_cpus();
  t.cpus = cpus;
  // On one core a spinner only delays the thread it waits for.
  if (cpus < 2) t.spin_budget = microseconds{0};
  // Loopback: every rank of the world is on this host.
  const bool loopback = is_loopback(options.bind_host);
  t.oversubscribed = loopback && options.world_size > cpus;
  // Where the kernel would clamp the loopback size (a stock net.core.rmem_max is
  // 208 KiB), its autotuning does better than the clamped size.
  const bool fits = socket_buffer_limit() >= kLoopbackSocketBufferBytes;
  t.socket_buffer_bytes = parse_socket_buffer_bytes(env("THD_TCP_SOCKET_BUFFER_BYTES"))
                              .value_or(loopback && fits ? kLoopbackSocketBufferBytes : 0);
  t.handshake_timeout = std::min<milliseconds>(net::kDefaultHandshakeTimeout, options.timeout);
  return t;
}

}  // namespace thd::detail::tcp
