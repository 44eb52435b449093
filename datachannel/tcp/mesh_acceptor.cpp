#include "datachannel/tcp/mesh_acceptor.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <system_error>

#include "datachannel/check.h"
#include "tensor/log.h"

namespace thd::detail::tcp {

using net::Clock;
using net::Deadline;
using std::chrono::milliseconds;

namespace {

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeId = 1;
constexpr int kMaxEvents = 32;
constexpr const char* kOp = "tcp backend set-up";

std::string errno_text(int err) { return std::system_category().message(err); }

}  // namespace

struct MeshAcceptor::Incoming {
  enum class Stage {
    Auth,      // the handshake: reading the ClientHello
    Identity,  // authenticated: reading the peer's Hello
    Reply,     // accepted: sending this rank's Hello
    Refused,   // sending the handshake's refusal, then closing
  };

  Incoming(uint64_t id, net::Socket sock, const net::AuthToken& token, Deadline deadline)
      : id(id), sock(std::move(sock)), handshake(token), deadline(deadline) {
    const auto hello = handshake.hello();
    out.assign(hello.begin(), hello.end());
  }

  uint64_t id;
  net::Socket sock;
  net::ServerHandshake handshake;
  Deadline deadline;
  Stage stage = Stage::Auth;
  std::vector<uint8_t> out;
  size_t out_sent = 0;
  HelloBytes hello{};
  size_t hello_got = 0;
  int rank = -1;
  uint32_t events = 0;
};

MeshAcceptor::MeshAcceptor(net::Socket listener, const net::AuthToken& token, Hello self,
                           milliseconds handshake_timeout)
    : listener_(std::move(listener)),
      token_(token),
      self_(self),
      handshake_timeout_(handshake_timeout),
      connected_(static_cast<size_t>(self.world_size)) {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  THD_CHECK(epoll_.valid(), ConnectionError, kOp, "epoll_create1 failed: {}", errno_text(errno));
  wake_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  THD_CHECK(wake_.valid(), ConnectionError, kOp, "eventfd failed: {}", errno_text(errno));
  for (auto [fd, id] : {std::pair{listener_.fd(), kListenerId}, std::pair{wake_.get(), kWakeId}}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = id;
    THD_CHECK(::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) == 0, ConnectionError, kOp,
              "epoll_ctl failed: {}", errno_text(errno));
  }
}

MeshAcceptor::~MeshAcceptor() = default;

void MeshAcceptor::stop() noexcept {
  stopping_.store(true);
  const uint64_t one = 1;
  // A full counter is already a pending wake-up: nothing to handle.
  [[maybe_unused]] auto n = ::write(wake_.get(), &one, sizeof(one));
}

void MeshAcceptor::run(Deadline deadline) noexcept {
  try {
    serve(deadline);
  } catch (...) {
    error_ = std::current_exception();
  }
  incoming_.clear();
  listener_.close();  // nothing listens once the mesh is made
}

bool MeshAcceptor::complete() const {
  for (int r = self_.rank + 1; r < self_.world_size; ++r) {
    if (!connected_[static_cast<size_t>(r)].valid()) return false;
  }
  return true;
}

void MeshAcceptor::serve(Deadline deadline) {
  epoll_event events[kMaxEvents];
  while (!stopping_.load() && !complete()) {
    const auto now = Clock::now();
    if (now >= deadline) return;
    Deadline next = deadline;
    for (const auto& c : incoming_) next = std::min(next, c->deadline);
    const int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, net::poll_timeout_ms(next));
    if (n < 0) {
      THD_CHECK(errno == EINTR, ConnectionError, kOp, "epoll_wait failed: {}", errno_text(errno));
      continue;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kWakeId) continue;  // stopping_ says why
      if (id == kListenerId) {
        accept_all();
        continue;
      }
      auto it = std::find_if(incoming_.begin(), incoming_.end(), [&](const auto& c) { return c->id == id; });
      if (it != incoming_.end() && !advance(**it)) close(id);
    }
    const auto later = Clock::now();
    for (size_t i = 0; i < incoming_.size();) {
      Incoming& c = *incoming_[i];
      if (later < c.deadline) {
        ++i;
        continue;
      }
      THD_LOG_WARN("{} (rank {}): dropped the connection from {}: it did not complete the handshake within {} ms",
                   kOp, self_.rank, c.sock.peer(), handshake_timeout_.count());
      close(c.id);
    }
  }
}

void MeshAcceptor::accept_all() {
  for (int batch = 0; batch < kMaxEvents; ++batch) {
    int err = 0;
    net::Socket s = listener_.accept(&err);
    if (!s.valid()) {
      if (err == 0) return;  // drained
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        // Out of descriptors: the peers retry their connects until the deadline.
        THD_LOG_WARN("{} (rank {}): cannot accept connections: {}", kOp, self_.rank, errno_text(err));
        return;
      }
      continue;  // that client gave up before we accepted it
    }
    const uint64_t id = next_id_++;
    std::unique_ptr<Incoming> c;
    try {
      c = std::make_unique<Incoming>(id, std::move(s), token_, net::deadline_after(handshake_timeout_));
    } catch (const Error& e) {  // drawing the nonce failed
      THD_LOG_WARN("{} (rank {}): cannot serve a connection: {}", kOp, self_.rank, e.message());
      continue;
    }
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.u64 = id;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c->sock.fd(), &ev) != 0) {
      THD_LOG_WARN("{} (rank {}): cannot watch the connection from {}: {}", kOp, self_.rank, c->sock.peer(),
                   errno_text(errno));
      continue;
    }
    c->events = EPOLLOUT;
    for (const uint64_t victim : admission_.admit(id, net::source_address(c->sock.fd()))) shed(victim);
    incoming_.push_back(std::move(c));
    if (!advance(*incoming_.back())) close(id);
  }
}

void MeshAcceptor::refuse(Incoming& c, const std::string& why) {
  THD_LOG_WARN("{} (rank {}): refused the connection from {}: {}", kOp, self_.rank, c.sock.peer(), why);
}

void MeshAcceptor::shed(uint64_t id) {
  auto it = std::find_if(incoming_.begin(), incoming_.end(), [&](const auto& c) { return c->id == id; });
  if (it == incoming_.end()) return;
  // Once per acceptor at warn: a flood would otherwise write a line per connection.
  const bool first = admission_.evicted() == 1;
  const auto& limits = admission_.limits();
  const std::string line =
      fmt::format("{} (rank {}): closed the connection from {} before its handshake: too many connections await "
                  "the handshake (at most {} per address, {} in all); the oldest makes room",
                  kOp, self_.rank, (*it)->sock.peer(), limits.per_source, limits.total);
  if (first) {
    THD_LOG_WARN("{}", line);
  } else {
    THD_LOG_DEBUG("{}", line);
  }
  close(id);
}

void MeshAcceptor::close(uint64_t id) {
  admission_.release(id);
  auto it = std::find_if(incoming_.begin(), incoming_.end(), [&](const auto& c) { return c->id == id; });
  if (it == incoming_.end()) return;
  if ((*it)->sock.valid()) {
    epoll_event unused{};
    (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, (*it)->sock.fd(), &unused);
  }
  incoming_.erase(it);
}

bool MeshAcceptor::advance(Incoming& c) {
  using Stage = Incoming::Stage;
  using Status = net::IoResult::Status;
  for (;;) {
    while (c.out_sent < c.out.size()) {
      net::IoResult r = c.sock.send_some(std::span(c.out).subspan(c.out_sent));
      if (r.status == Status::WouldBlock) break;
      if (r.status != Status::Ok) {
        if (c.stage != Stage::Refused) {
          THD_LOG_WARN("{} (rank {}): lost the connection from {} during the handshake: {}", kOp, self_.rank,
                       c.sock.peer(), errno_text(r.error));
        }
        return false;
      }
      c.out_sent += r.bytes;
    }
    const bool flushed = c.out_sent == c.out.size();
    if (flushed && c.stage == Stage::Refused) return false;
    if (flushed && c.stage == Stage::Reply) {
      epoll_event unused{};
      (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.sock.fd(), &unused);
      THD_LOG_DEBUG("{} (rank {}): rank {} connected from {}", kOp, self_.rank, c.rank, c.sock.peer());
      connected_[static_cast<size_t>(c.rank)] = std::move(c.sock);
      return false;
    }

    // Read exactly what the current step still lacks, never more.
    std::span<uint8_t> want;
    if (c.stage == Stage::Auth) want = c.handshake.input();
    if (c.stage == Stage::Identity) want = std::span(c.hello).subspan(c.hello_got);
    if (!want.empty()) {
      net::IoResult r = c.sock.recv_some(want);
      if (r.status == Status::Eof || r.status == Status::Error) {
        refuse(c, r.status == Status::Eof ? std::string("it hung up during the handshake")
                                          : fmt::format("connection error: {}", errno_text(r.error)));
        return false;
      }
      if (r.status == Status::Ok) {
        if (c.stage == Stage::Auth) c.handshake.received(r.bytes);
        if (c.stage == Stage::Identity) c.hello_got += r.bytes;
      }
    }

    bool moved_on = false;
    if (c.stage == Stage::Auth && c.handshake.input_complete()) {
      net::ServerHandshake::Verdict v = c.handshake.verify();
      c.out.insert(c.out.end(), v.reply.begin(), v.reply.end());
      if (v.accepted) {
        admission_.release(c.id);  // authenticated: no longer counted against the flood limits
        c.stage = Stage::Identity;
      } else {
        refuse(c, v.reason);
        if (v.reply.empty()) return false;
        c.stage = Stage::Refused;
      }
      moved_on = true;
    } else if (c.stage == Stage::Identity && c.hello_got == kHelloBytes) {
      Hello peer;
      std::string why;
      if (!decode_hello(c.hello, &peer, &why)) {
        refuse(c, why);
        return false;
      }
      if (peer.channel != self_.channel) {
        refuse(c, "it belongs to another job or channel (its channel id differs)");
        return false;
      }
      if (peer.world_size != self_.world_size) {
        refuse(c, fmt::format("it says the world has {} ranks, this rank's world has {}", peer.world_size,
                              self_.world_size));
        return false;
      }
      if (peer.rank <= self_.rank || peer.rank >= self_.world_size) {
        refuse(c, fmt::format("it claims rank {}, but rank {} accepts only ranks {}..{}", peer.rank, self_.rank,
                              self_.rank + 1, self_.world_size - 1));
        return false;
      }
      if (connected_[static_cast<size_t>(peer.rank)].valid()) {
        refuse(c, fmt::format("it claims rank {}, which is already connected", peer.rank));
        return false;
      }
      c.rank = peer.rank;
      const HelloBytes mine = encode_hello(self_);
      c.out.insert(c.out.end(), mine.begin(), mine.end());
      c.stage = Stage::Reply;
      moved_on = true;
    }
    if (moved_on) continue;

    const bool reading = c.stage == Stage::Auth || c.stage == Stage::Identity;
    const uint32_t events = (c.out_sent < c.out.size() ? EPOLLOUT : 0u) | (reading ? EPOLLIN | EPOLLRDHUP : 0u);
    if (events != c.events) {
      epoll_event ev{};
      ev.events = events;
      ev.data.u64 = c.id;
      if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.sock.fd(), &ev) != 0) {
        refuse(c, fmt::format("cannot watch it: {}", errno_text(errno)));
        return false;
      }
      c.events = events;
    }
    return true;
  }
}

}  // namespace thd::detail::tcp
