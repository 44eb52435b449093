// The byte-level half of TcpTransport: reading frames off a peer's socket into
// receives or unexpected buffers, writing queued frames, and matching. Every
// function here runs under the engine lock and never blocks.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <optional>
#include <system_error>

#include "datachannel/check.h"
#include "datachannel/small_header.h"
#include "datachannel/tcp/tcp_transport_impl.h"

namespace thd::detail::tcp {

namespace {

// Payload bytes still due at or above this are read straight into their
// destination; below it they are read with whatever follows (the next headers)
// into the read buffer and copied, which saves system calls on small messages.
constexpr size_t kDirectReadMin = size_t{16} << 10;
// Bytes one peer may move per turn before the engine looks at the others (and a
// spinning waiter at its request).
constexpr size_t kMaxBytesPerTurn = size_t{8} << 20;
// iovec entries per sendmsg: (header, payload) pairs of queued frames.
constexpr int kMaxIov = 64;

std::string errno_text(int err) { return std::system_category().message(err); }

}  // namespace

// ---- receiving ---------------------------------------------------------------------------

size_t TcpTransport::read_from(Peer& p) {
  size_t moved = 0;
  // A read that returned less than it asked for emptied the socket: asking again
  // now would only cost an EAGAIN (the level-triggered epoll says when more comes).
  // Past the per-turn cap the socket is left for the next turn too; what is in the
  // read buffer is always processed, since no socket event would bring it back.
  bool socket_empty = false;
  auto may_read = [&] { return !socket_empty && moved < kMaxBytesPerTurn; };
  while (!p.lost && p.rx != Rx::Parked) {
    const size_t have = p.rend - p.rbegin;
    if (p.rx == Rx::Header) {
      const size_t header =
          have > 0 && p.rbuf[p.rbegin] == kSmallMessageMarker ? kSmallHeaderBytes : kFrameHeaderBytes;
      if (have >= header) {
        start_frame(p);
      } else if (!may_read() || !fill_read_buffer(p, &moved, &socket_empty)) {
        break;
      }
      continue;
    }
    uint8_t* dst = nullptr;  // null: discard
    const uint64_t left = payload_left(p, &dst);
    size_t n = 0;
    if (have > 0) {
      n = static_cast<size_t>(std::min<uint64_t>(have, left));
      if (dst != nullptr) std::memcpy(dst, p.rbuf.get() + p.rbegin, n);
      p.rbegin += n;
    } else if (!may_read()) {
      break;
    } else if (dst != nullptr && left >= kDirectReadMin) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(left, kMaxBytesPerTurn - moved));
      const net::IoResult r = p.socket.recv_some(std::span(dst, want));
      if (r.status == net::IoResult::Status::WouldBlock) break;
      if (r.status != net::IoResult::Status::Ok) {
        lose_peer(p,
                  r.status == net::IoResult::Status::Eof
                      ? std::string("it closed the connection in the middle of a message (its process exited or "
                                    "was killed)")
                      : fmt::format("its connection failed: {}", errno_text(r.error)),
                  /*warn=*/false);
        break;
      }
      n = r.bytes;
      moved += n;
      socket_empty = n < want;
    } else {
      if (!fill_read_buffer(p, &moved, &socket_empty)) break;
      continue;
    }
    advance_payload(p, n);
  }
  return moved;
}

void TcpTransport::resume_reading(Peer& p) {
  update_interest(p);
  // Bytes of the stream may already sit in the read buffer (read before the peer
  // was parked): no socket event will come for them.
  if (!p.lost && p.rx != Rx::Parked && p.rend > p.rbegin) read_from(p);
}

uint64_t TcpTransport::payload_left(const Peer& p, uint8_t** dst) const {
  switch (p.rx) {
    case Rx::IntoRecv:
      *dst = p.target.data.data() + p.target_done;
      return p.frame.payload_bytes - p.target_done;
    case Rx::IntoBuffer:
      *dst = p.entry->payload.get() + p.entry->arrived;
      return p.frame.payload_bytes - p.entry->arrived;
    case Rx::Discard:
      *dst = nullptr;
      return p.discard_left;
    case Rx::Header:
    case Rx::Parked:
      break;
  }
  *dst = nullptr;
  return 0;
}

void TcpTransport::advance_payload(Peer& p, size_t n) {
  switch (p.rx) {
    case Rx::IntoRecv: p.target_done += n; break;
    case Rx::IntoBuffer: p.entry->arrived += n; break;
    case Rx::Discard: p.discard_left -= n; break;
    case Rx::Header:
    case Rx::Parked: return;
  }
  // Finished frames are closed at once: nothing may see a complete message whose
  // peer still points at it.
  uint8_t* unused = nullptr;
  if (payload_left(p, &unused) == 0) finish_frame(p);
}

bool TcpTransport::fill_read_buffer(Peer& p, size_t* moved, bool* emptied) {
  if (p.rbegin == p.rend) {
    p.rbegin = p.rend = 0;
  } else if (p.rbegin > 0) {
    std::memmove(p.rbuf.get(), p.rbuf.get() + p.rbegin, p.rend - p.rbegin);
    p.rend -= p.rbegin;
    p.rbegin = 0;
  }
  const size_t room = kReadBufferBytes - p.rend;
  const net::IoResult r = p.socket.recv_some(std::span(p.rbuf.get() + p.rend, room));
  switch (r.status) {
    case net::IoResult::Status::Ok:
      *emptied = r.bytes < room;
      p.rend += r.bytes;
      *moved += r.bytes;
      return true;
    case net::IoResult::Status::WouldBlock:
      return false;
    case net::IoResult::Status::Eof:
      lose_peer(p,
                p.rx == Rx::Header && p.rend == 0
                    ? std::string("it closed the connection (its process exited or was killed, or it closed its "
                                  "channel)")
                    : std::string("it closed the connection in the middle of a message (its process exited or "
                                  "was killed)"),
                /*warn=*/false);
      return false;
    case net::IoResult::Status::Error:
      lose_peer(p,
                r.error == ECONNRESET ? std::string("its connection was reset (its process exited or was killed)")
                                      : fmt::format("its connection failed: {}", errno_text(r.error)),
                /*warn=*/false);
      return false;
  }
  return false;
}

bool TcpTransport::read_header(Peer& p, FrameHeader* h) {
  const uint8_t* at = p.rbuf.get() + p.rbegin;
  std::string why;
  if (at[0] == kSmallMessageMarker) {
    std::optional<size_t> payload;
    if (read_small_envelope(at, &h->envelope)) payload = small_payload_bytes(h->envelope.kind);
    if (payload) {
      h->payload_bytes = *payload;
      h->kind = FrameKind::Message;
      h->rendezvous_id = 0;
      p.rbegin += kSmallHeaderBytes;
      return true;
    }
    why = fmt::format("a short header with dtype code {} and tag {}", at[1], le::get<int64_t>(at + 8));
  } else if (decode_frame_header(std::span<const uint8_t, kFrameHeaderBytes>(at, kFrameHeaderBytes), h, &why)) {
    p.rbegin += kFrameHeaderBytes;
    return true;
  }
  lose_peer(p, fmt::format("it sent a malformed message header ({}); the connection was closed", why),
            /*warn=*/true);
  return false;
}

void TcpTransport::start_frame(Peer& p) {
  FrameHeader h;
  if (!read_header(p, &h)) return;
  if (h.kind != FrameKind::Message && h.kind != FrameKind::ReadyToSend) {
    on_rendezvous_frame(p, h);
    return;
  }
  p.frame = h;
  if (auto recv = queues_.take_posted(p.rank, h.envelope)) {
    if (h.kind == FrameKind::ReadyToSend) {
      accept_announcement(p, h, std::move(*recv));
    } else {
      receive_into(p, std::move(*recv));
    }
    return;
  }
  UnexpectedMessage m;
  m.source = p.rank;
  m.header = h;
  UnexpectedMessage* entry = queues_.add_unexpected(std::move(m));
  if (!try_buffer(p, *entry)) {
    // No room: leave the payload in the socket and stop reading this peer until a
    // receive takes the message or buffered ones drain (TCP backpressure).
    entry->parked = true;
    p.entry = entry;
    p.rx = Rx::Parked;
    update_interest(p);
  }
}

void TcpTransport::receive_into(Peer& p, PostedRecv recv) {
  const uint64_t size = p.frame.payload_bytes;
  if (auto err = accept_match(rank(), p.rank, recv, p.frame.envelope, size)) {
    recv.request->fail(err);
    recv = {};
  }
  read_payload_into(p, std::move(recv));
}

void TcpTransport::read_payload_into(Peer& p, PostedRecv recv) {
  if (!recv.request || recv.request->finished()) {
    p.discard_left = p.frame.payload_bytes;
    p.rx = Rx::Discard;
  } else {
    p.target = std::move(recv);
    p.target_done = 0;
    p.rx = Rx::IntoRecv;
  }
  advance_payload(p, 0);  // an empty message is complete already
}

void TcpTransport::finish_frame(Peer& p) {
  switch (p.rx) {
    case Rx::IntoRecv:
      p.target.request->complete(p.rank, p.frame.payload_bytes);
      p.target = {};
      break;
    case Rx::IntoBuffer:
      p.entry = nullptr;  // complete now; a receive will take it
      break;
    case Rx::Discard:
    case Rx::Header:
    case Rx::Parked:
      break;
  }
  p.rx = Rx::Header;
}

bool TcpTransport::try_buffer(Peer& p, UnexpectedMessage& message) {
  // An announcement holds no payload here: only its header is charged.
  const uint64_t size = message.announced() ? 0 : message.header.payload_bytes;
  const uint64_t charge = size + UnexpectedMessage::kOverheadBytes;
  if (charge > tuning_.unexpected_limit || p.buffered + charge > tuning_.unexpected_limit) return false;
  if (message.announced()) {
    p.buffered += static_cast<size_t>(charge);
    message.charged = static_cast<size_t>(charge);
    message.parked = false;
    p.entry = nullptr;
    p.rx = Rx::Header;
    return true;
  }
  if (size > 0) {
    try {
      message.payload = std::make_unique_for_overwrite<uint8_t[]>(static_cast<size_t>(size));
    } catch (const std::bad_alloc&) {
      return false;  // parked instead: a receive will take it straight from the socket
    }
  }
  p.buffered += static_cast<size_t>(charge);
  message.charged = static_cast<size_t>(charge);
  message.parked = false;
  message.arrived = 0;
  p.entry = &message;
  p.rx = Rx::IntoBuffer;
  advance_payload(p, 0);  // an empty message is complete already
  return true;
}

void TcpTransport::release_buffer(Peer& p, size_t bytes) {
  p.buffered -= std::min(bytes, p.buffered);
  if (p.lost || p.rx != Rx::Parked) return;
  if (try_buffer(p, *p.entry)) resume_reading(p);
}

void TcpTransport::take_unexpected(UnexpectedMessage* m, PostedRecv recv) {
  const int src = m->source;
  const uint64_t size = m->header.payload_bytes;
  const size_t charged = m->charged;
  if (m->announced()) {
    // Nothing of it is here yet: ask its sender for it (or decline it).
    Peer& p = peers_[static_cast<size_t>(src)];
    const FrameHeader h = m->header;
    const bool parked_on_it = p.rx == Rx::Parked && p.entry == m;
    queues_.erase_unexpected(m);
    if (parked_on_it) {
      p.entry = nullptr;
      p.rx = Rx::Header;
    }
    accept_announcement(p, h, std::move(recv));
    release_buffer(p, charged);  // may unpark its sender
    if (parked_on_it) resume_reading(p);
    return;
  }
  if (m->complete()) {
    // A receive of any length adopts the buffer the message arrived in.
    std::exception_ptr err = accept_match(rank(), src, recv, m->header.envelope, size, &m->payload);
    if (!err && size > 0 && m->payload) std::memcpy(recv.data.data(), m->payload.get(), static_cast<size_t>(size));
    queues_.erase_unexpected(m);
    if (err) {
      recv.request->fail(err);
    } else {
      recv.request->complete(src, static_cast<size_t>(size));
    }
    if (src != rank()) release_buffer(peers_[static_cast<size_t>(src)], charged);  // may unpark its sender
    return;
  }
  // Still on its way from its sender, which is reading it now (or parked on it):
  // the rest goes straight into the receive's memory, or nowhere on a mismatch.
  std::exception_ptr err = accept_match(rank(), src, recv, m->header.envelope, size);
  Peer& p = peers_[static_cast<size_t>(src)];
  const size_t arrived = m->parked ? 0 : m->arrived;
  if (!err && arrived > 0) std::memcpy(recv.data.data(), m->payload.get(), arrived);
  queues_.erase_unexpected(m);
  p.entry = nullptr;
  if (err) {
    recv.request->fail(err);
    p.discard_left = size - arrived;
    p.rx = Rx::Discard;
  } else {
    p.target = std::move(recv);
    p.target_done = arrived;
    p.rx = Rx::IntoRecv;
  }
  release_buffer(p, charged);
  resume_reading(p);
}

void TcpTransport::send_to_self(std::span<const uint8_t> data, const Envelope& envelope,
                                const std::shared_ptr<RequestState>& request) {
  if (auto recv = queues_.take_posted(rank(), envelope)) {
    if (auto err = accept_match(rank(), rank(), *recv, envelope, data.size())) {
      recv->request->fail(err);
    } else {
      if (!data.empty()) std::memcpy(recv->data.data(), data.data(), data.size());
      recv->request->complete(rank(), data.size());
    }
    request->complete(-1, data.size());  // its message was taken, matched or not
    return;
  }
  // Kept as a copy, so a blocking send to oneself returns before its receive.
  UnexpectedMessage m;
  m.source = rank();
  m.header = FrameHeader{envelope, data.size()};
  if (!data.empty()) {
    try {
      m.payload = std::make_unique_for_overwrite<uint8_t[]>(data.size());
    } catch (const std::bad_alloc&) {
      try {
        THD_THROW_AT(ValueError, request->op, rank(), rank(), "out of memory buffering {} bytes sent to itself",
                     data.size());
      } catch (...) {
        request->fail(std::current_exception());
      }
      return;
    }
    std::memcpy(m.payload.get(), data.data(), data.size());
  }
  m.arrived = data.size();
  queues_.add_unexpected(std::move(m));
  request->complete(-1, data.size());
}

// ---- sending ----------------------------------------------------------------------------

size_t TcpTransport::write_to(Peer& p) {
  size_t moved = 0;
  while (!p.sends.empty() && moved < kMaxBytesPerTurn) {
    iovec iov[kMaxIov];
    int n = 0;
    for (const SendOp& op : p.sends) {
      if (n + 2 > kMaxIov) break;
      if (op.header_sent < op.header_size) {
        iov[n++] = {const_cast<uint8_t*>(op.header.data()) + op.header_sent, op.header_size - op.header_sent};
      }
      if (op.payload_sent < op.payload.size()) {
        iov[n++] = {const_cast<uint8_t*>(op.payload.data()) + op.payload_sent, op.payload.size() - op.payload_sent};
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    const ssize_t w = ::sendmsg(p.socket.fd(), &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      const int err = errno;
      lose_peer(p,
                err == EPIPE || err == ECONNRESET
                    ? std::string("its connection was closed or reset while sending to it (its process exited or "
                                  "was killed)")
                    : fmt::format("sending to it failed: {}", errno_text(err)),
                /*warn=*/false);
      return moved;
    }
    size_t left = static_cast<size_t>(w);
    moved += left;
    while (!p.sends.empty()) {
      SendOp& op = p.sends.front();
      const size_t h = std::min(left, op.header_size - op.header_sent);
      op.header_sent += h;
      left -= h;
      const size_t b = std::min(left, op.payload.size() - op.payload_sent);
      op.payload_sent += b;
      left -= b;
      if (op.header_sent < op.header_size || op.payload_sent < op.payload.size()) break;
      sent_frame(p, op);
      p.sends.pop_front();
    }
  }
  update_interest(p);
  return moved;
}

void TcpTransport::sent_frame(Peer& p, SendOp& op) {
  switch (op.kind) {
    case FrameKind::Message:
    case FrameKind::Data:
      if (op.request) op.request->complete(-1, op.nbytes);
      return;
    case FrameKind::ReadyToSend:
      // Announced: the payload goes when the receiver asks. An announcement
      // cancelled while it was being written was revoked behind it already.
      if (op.request && !op.request->finished()) p.announced.emplace(op.rendezvous_id, std::move(op));
      return;
    case FrameKind::ClearToSend:
    case FrameKind::Decline:
    case FrameKind::Revoke:
    case FrameKind::Goodbye:
      return;
  }
}

void TcpTransport::update_interest(Peer& p) {
  if (p.lost) return;
  // A parked peer's bytes are left in its socket, but its close is still watched:
  // a peer that leaves while this rank holds all it may of its messages is cut off
  // (dispatch), not waited for until a receive drains it, which may never come.
  const uint32_t want = (p.rx != Rx::Parked ? EPOLLIN | EPOLLRDHUP : EPOLLRDHUP) | (p.sends.empty() ? 0u : EPOLLOUT);
  if (want == p.interest) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = static_cast<uint64_t>(p.rank);
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, p.socket.fd(), &ev) != 0) {
    lose_peer(p, fmt::format("cannot watch its connection: {}", errno_text(errno)), /*warn=*/true);
    return;
  }
  p.interest = want;
}

// ---- rendezvous ---------------------------------------------------------------------------

void TcpTransport::queue_frame(Peer& p, SendOp op) {
  p.sends.push_back(std::move(op));
  if (p.sends.size() == 1) {
    write_to(p);
  } else {
    update_interest(p);
  }
}

void TcpTransport::queue_control(Peer& p, FrameKind kind, uint64_t id) {
  SendOp op;
  op.kind = kind;
  op.rendezvous_id = id;
  op.header = encode_rendezvous_frame(kind, id);
  queue_frame(p, std::move(op));
}

void TcpTransport::accept_announcement(Peer& p, const FrameHeader& h, PostedRecv recv) {
  const uint64_t id = h.rendezvous_id;
  if (p.lost) {
    recv.request->fail(lost_error(p, recv.request->op));
    return;
  }
  if (auto err = accept_match(rank(), p.rank, recv, h.envelope, h.payload_bytes)) {
    recv.request->fail(err);
    queue_control(p, FrameKind::Decline, id);
    return;
  }
  if (!p.awaiting_data.emplace(id, std::move(recv)).second) {
    lose_peer(p, fmt::format("it announced rendezvous id {} twice; the connection was closed", id), /*warn=*/true);
    return;
  }
  queue_control(p, FrameKind::ClearToSend, id);
}

void TcpTransport::on_rendezvous_frame(Peer& p, const FrameHeader& h) {
  const uint64_t id = h.rendezvous_id;
  switch (h.kind) {
    case FrameKind::ClearToSend: {
      // Unknown ids were revoked by this side after the receiver had asked.
      auto it = p.announced.find(id);
      if (it == p.announced.end()) return;
      SendOp op = std::move(it->second);
      p.announced.erase(it);
      op.kind = FrameKind::Data;
      op.header = encode_rendezvous_frame(FrameKind::Data, id, op.nbytes);
      op.header_sent = 0;
      op.payload = op.announced;
      op.payload_sent = 0;
      op.announced = {};
      queue_frame(p, std::move(op));
      return;
    }
    case FrameKind::Decline: {
      // As for a whole message that did not fit its receive: the send completes,
      // the receive reports the mismatch.
      auto it = p.announced.find(id);
      if (it == p.announced.end()) return;
      it->second.request->complete(-1, it->second.nbytes);
      p.announced.erase(it);
      return;
    }
    case FrameKind::Revoke: {
      auto it = p.awaiting_data.find(id);
      if (it != p.awaiting_data.end()) {
        if (it->second.request) {
          try {
            THD_THROW_AT(ConnectionError, it->second.request->op, rank(), p.rank,
                         "rank {} gave up sending this message after it was matched (its send timed out or was "
                         "cancelled)",
                         p.rank);
          } catch (...) {
            it->second.request->fail(std::current_exception());
          }
        }
        p.awaiting_data.erase(it);
        return;
      }
      // Not matched yet: the announcement is withdrawn as if never sent.
      const int src = p.rank;
      size_t charged = 0;
      queues_.erase_unexpected_if([&](const UnexpectedMessage& m) {
        if (m.source != src || !m.announced() || m.header.rendezvous_id != id) return false;
        charged += m.charged;
        return true;
      });
      release_buffer(p, charged);
      return;
    }
    case FrameKind::Data: {
      auto it = p.awaiting_data.find(id);
      if (it == p.awaiting_data.end()) {
        lose_peer(p,
                  fmt::format("it sent the data of a message (rendezvous id {}) that was never asked for; the "
                              "connection was closed",
                              id),
                  /*warn=*/true);
        return;
      }
      PostedRecv recv = std::move(it->second);
      p.awaiting_data.erase(it);
      if (h.payload_bytes != recv.data.size()) {
        lose_peer(p,
                  fmt::format("it sent {} bytes for a message (rendezvous id {}) announced with {}; the "
                              "connection was closed",
                              h.payload_bytes, id, recv.data.size()),
                  /*warn=*/true);
        if (recv.request) recv.request->fail(lost_error(p, recv.request->op));
        return;
      }
      p.frame = h;
      read_payload_into(p, std::move(recv));
      return;
    }
    case FrameKind::Goodbye:
      departed_flags_[static_cast<size_t>(p.rank)].store(true, std::memory_order_release);
      return;
    case FrameKind::Message:
    case FrameKind::ReadyToSend:
      return;  // not rendezvous steps: start_frame handles them
  }
}

}  // namespace thd::detail::tcp
