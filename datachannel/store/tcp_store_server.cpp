#include "datachannel/store/tcp_store_server.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <deque>
#include <optional>
#include <set>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "datachannel/check.h"
#include "datachannel/net/handshake_admission.h"
#include "datachannel/store/store_util.h"
#include "datachannel/store/tcp_store_wire.h"
#include "tensor/log.h"

namespace thd::detail {

namespace wire = store_wire;
using net::Clock;
using net::Deadline;
using std::chrono::milliseconds;

namespace {

// Bytes asked of recv() at a time; a message larger than this is read in one
// recv() of its remaining size.
constexpr size_t kReadChunk = 64 * 1024;
// How long accepting pauses when the process is out of file descriptors, so the
// loop does not spin on a listener it cannot drain.
constexpr milliseconds kAcceptBackoff{100};
constexpr int kMaxEvents = 64;

std::string errno_text(int err) { return std::system_category().message(err); }

}  // namespace

class TCPStoreServer::Loop {
 public:
  Loop(net::Socket listener, net::AuthToken token, milliseconds handshake_timeout, JoinCounter& joined)
      : listener_(std::move(listener)),
        token_(std::move(token)),
        handshake_timeout_(handshake_timeout),
        joined_(joined),
        name_(listener_.peer()) {
    epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
    THD_CHECK(epoll_.valid(), ConnectionError, "TCPStore", "epoll_create1 failed: {}", errno_text(errno));
    wake_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    THD_CHECK(wake_.valid(), ConnectionError, "TCPStore", "eventfd failed: {}", errno_text(errno));
    ctl(EPOLL_CTL_ADD, listener_.fd(), EPOLLIN, kListenerId);
    ctl(EPOLL_CTL_ADD, wake_.get(), EPOLLIN, kWakeId);
  }

  // Any thread: makes run() return soon.
  void stop() noexcept {
    stopping_.store(true);
    const uint64_t one = 1;
    // Cannot fail in a way that matters: a full counter is already a pending wake-up.
    [[maybe_unused]] auto n = ::write(wake_.get(), &one, sizeof(one));
  }

  void run() noexcept {
    try {
      epoll_event events[kMaxEvents];
      while (!stopping_.load()) {
        int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, next_timeout_ms());
        if (n < 0) {
          THD_CHECK(errno == EINTR, ConnectionError, "TCPStore", "epoll_wait failed: {}", errno_text(errno));
          continue;
        }
        for (int i = 0; i < n; ++i) dispatch(events[i]);
        expire_timers();
        drain_runnable();
      }
    } catch (const std::exception& e) {
      THD_LOG_ERROR("store server {}: stopped by an internal error: {}", name_, e.what());
    }
    // Closing every connection makes blocked clients fail at once (PeerLost)
    // rather than wait out their timeouts.
    conns_.clear();
    listener_.close();
  }

 private:
  static constexpr uint64_t kListenerId = 0;
  static constexpr uint64_t kWakeId = 1;

  struct Conn {
    uint64_t id = 0;
    net::Socket sock;
    // Until `ready`, the auth handshake in progress; nothing else is read.
    std::optional<net::ServerHandshake> handshake;
    bool ready = false;
    bool closing = false;  // refused: send `out`, then close
    wire::Bytes in;
    size_t in_begin = 0;   // bytes of `in` already consumed
    wire::Bytes out;
    size_t out_begin = 0;  // bytes of `out` already sent
    std::optional<wire::Request> parked;
    std::string parked_on;             // the key whose waiter list holds this id
    std::optional<Deadline> deadline;  // of the handshake or the parked request
    uint32_t events = 0;               // the epoll interest registered now
    bool joined = false;

    size_t unsent() const { return out.size() - out_begin; }
    size_t buffered() const { return in.size() - in_begin; }
  };

  enum class Level { Debug, Warn };

  // For the listener and the wake-up fd, which the loop cannot run without.
  void ctl(int op, int fd, uint32_t events, uint64_t id) {
    THD_CHECK(try_ctl(op, fd, events, id) == 0, ConnectionError, "TCPStore", "epoll_ctl failed: {}",
              errno_text(errno));
  }

  int try_ctl(int op, int fd, uint32_t events, uint64_t id) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = id;
    return ::epoll_ctl(epoll_.get(), op, fd, &ev);
  }

  Conn* find(uint64_t id) {
    auto it = conns_.find(id);
    return it == conns_.end() ? nullptr : &it->second;
  }

  int next_timeout_ms() const {
    std::optional<Deadline> next;
    if (!timers_.empty()) next = timers_.begin()->first;
    if (accept_paused_ && (!next || accept_resume_ < *next)) next = accept_resume_;
    if (!runnable_.empty()) return 0;
    return next ? net::poll_timeout_ms(*next) : -1;
  }

  void dispatch(const epoll_event& ev) {
    if (ev.data.u64 == kWakeId) {
      uint64_t v;
      [[maybe_unused]] auto n = ::read(wake_.get(), &v, sizeof(v));
      return;
    }
    if (ev.data.u64 == kListenerId) {
      accept_all();
      return;
    }
    Conn* c = find(ev.data.u64);
    if (c == nullptr) return;  // closed earlier in this batch
    on_io(*c, ev.events);
  }

  void accept_all() {
    // A bounded batch: under a flood of connections the listener stays readable
    // (level-triggered) and the clients already connected get their turn between
    // batches.
    for (int batch = 0; batch < kMaxEvents; ++batch) {
      int err = 0;
      net::Socket s = listener_.accept(&err);
      if (!s.valid()) {
        if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
          THD_LOG_WARN("store server {}: cannot accept connections: {}; pausing for {} ms", name_,
                       errno_text(err), kAcceptBackoff.count());
          accept_paused_ = true;
          accept_resume_ = Clock::now() + kAcceptBackoff;
          ctl(EPOLL_CTL_MOD, listener_.fd(), 0, kListenerId);
          return;
        }
        if (err == 0) return;  // drained
        continue;              // the peer gave up before we accepted: next one
      }
      const uint64_t id = next_id_++;
      Conn& c = conns_[id];
      c.id = id;
      c.sock = std::move(s);
      try {
        c.handshake.emplace(token_);  // draws a nonce, which can fail
      } catch (const Error& e) {
        close(c, Level::Warn, e.what());
        continue;
      }
      const auto hello = c.handshake->hello();
      c.out.assign(hello.begin(), hello.end());
      set_deadline(c, net::deadline_after(handshake_timeout_));
      c.events = EPOLLRDHUP;
      if (try_ctl(EPOLL_CTL_ADD, c.sock.fd(), c.events, id) != 0) {
        // Out of epoll resources: this connection cannot be served, the others can.
        close(c, Level::Warn, fmt::format("cannot watch the connection: {}", errno_text(errno)));
        continue;
      }
      THD_LOG_DEBUG("store server {}: connection from {}", name_, c.sock.peer());
      for (const uint64_t victim : admission_.admit(id, net::source_address(c.sock.fd()))) shed(victim);
      progress(id);
    }
  }

  bool wants_read(const Conn& c) const {
    if (c.closing) return false;
    if (!c.ready) return !c.handshake->input_complete();
    return !c.parked && c.unsent() == 0;
  }

  void on_io(Conn& c, uint32_t events) {
    const uint64_t id = c.id;
    if ((events & EPOLLOUT) && !flush(c)) return;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      if (wants_read(c)) {
        if (!read(c)) return;
      } else if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        // Gone while we were not reading from it (a parked get, say).
        close(c, Level::Debug, "disconnected");
        return;
      }
    }
    progress(id);
  }

  // Returns false when the connection was closed.
  bool read(Conn& c) {
    if (!c.ready) {
      net::IoResult r = c.sock.recv_some(c.handshake->input());
      switch (r.status) {
        case net::IoResult::Status::Ok:
          c.handshake->received(r.bytes);
          return true;
        case net::IoResult::Status::WouldBlock:
          return true;
        case net::IoResult::Status::Eof:
          close(c, Level::Warn, "closed the connection during the auth handshake");
          return false;
        case net::IoResult::Status::Error:
          close(c, Level::Warn, fmt::format("auth handshake failed: {}", errno_text(r.error)));
          return false;
      }
    }
    // Compact, then read what the current message still lacks (at least a chunk).
    if (c.in_begin > 0) {
      c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(c.in_begin));
      c.in_begin = 0;
    }
    size_t want = kReadChunk;
    if (c.in.size() >= wire::kLengthBytes) {
      const size_t frame = wire::kLengthBytes + std::min(wire::decode_length(c.in.data()), wire::kMaxMessageBytes);
      if (frame > c.in.size()) want = std::max(want, frame - c.in.size());
    }
    const size_t old = c.in.size();
    c.in.resize(old + want);
    net::IoResult r = c.sock.recv_some(std::span(c.in).subspan(old));
    c.in.resize(old + (r.status == net::IoResult::Status::Ok ? r.bytes : 0));
    switch (r.status) {
      case net::IoResult::Status::Ok:
      case net::IoResult::Status::WouldBlock:
        return true;
      case net::IoResult::Status::Eof:
        if (c.buffered() > 0) {
          close(c, Level::Warn, fmt::format("closed the connection in the middle of a message ({} bytes)",
                                            c.buffered()));
        } else {
          close(c, Level::Debug, "disconnected");
        }
        return false;
      case net::IoResult::Status::Error:
        close(c, Level::Debug, fmt::format("connection lost: {}", errno_text(r.error)));
        return false;
    }
    return true;
  }

  // Sends what it can of c.out. Returns false when the connection was closed.
  bool flush(Conn& c) {
    while (c.unsent() > 0) {
      net::IoResult r = c.sock.send_some(std::span(c.out).subspan(c.out_begin));
      if (r.status == net::IoResult::Status::WouldBlock) return true;
      if (r.status != net::IoResult::Status::Ok) {
        close(c, Level::Debug, fmt::format("connection lost while sending: {}", errno_text(r.error)));
        return false;
      }
      c.out_begin += r.bytes;
    }
    c.out.clear();
    c.out_begin = 0;
    if (c.closing) {
      close(c, Level::Debug, "closed after refusal");
      return false;
    }
    return true;
  }

  // Advances a connection as far as its buffered input allows, then registers the
  // events it now waits for.
  void progress(uint64_t id) {
    Conn* c = find(id);
    if (c == nullptr) return;
    if (!c->ready) {
      if (!c->closing && c->handshake->input_complete()) {
        net::ServerHandshake::Verdict v = c->handshake->verify();
        if (v.accepted) {
          admission_.release(c->id);  // authenticated: no longer counted against the flood limits
          c->ready = true;
          c->handshake.reset();
          clear_deadline(*c);
          THD_LOG_DEBUG("store server {}: {} authenticated", name_, c->sock.peer());
        } else {
          THD_LOG_WARN("store server {}: refused the connection from {}: {}", name_, c->sock.peer(), v.reason);
          if (v.reply.empty()) {
            close(*c, Level::Debug, "refused");
            return;
          }
          c->closing = true;  // the handshake deadline still bounds the goodbye
        }
        c->out.insert(c->out.end(), v.reply.begin(), v.reply.end());
      }
      if (!flush(*c)) return;
      update_interest(*c);
      return;
    }
    while (!c->parked && c->unsent() == 0 && c->buffered() >= wire::kLengthBytes) {
      const uint32_t len = wire::decode_length(c->in.data() + c->in_begin);
      if (len == 0 || len > wire::kMaxMessageBytes) {
        close(*c, Level::Warn,
              len == 0 ? std::string("sent an empty message; dropping it")
                       : fmt::format("sent a message of {} bytes (the limit is {} bytes); dropping it", len,
                                     wire::kMaxMessageBytes));
        return;
      }
      if (c->buffered() < wire::kLengthBytes + len) break;
      wire::Request req;
      std::string why;
      const std::span body(c->in.data() + c->in_begin + wire::kLengthBytes, len);
      if (!wire::decode_request(body, &req, &why)) {
        close(*c, Level::Warn, fmt::format("sent a malformed request ({}); dropping it", why));
        return;
      }
      c->in_begin += wire::kLengthBytes + len;
      execute(*c, std::move(req));
      if (!flush(*c)) return;
    }
    if (c->in_begin == c->in.size()) {
      c->in.clear();
      c->in_begin = 0;
    }
    update_interest(*c);
  }

  void update_interest(Conn& c) {
    uint32_t events = EPOLLRDHUP;
    if (wants_read(c)) events |= EPOLLIN;
    if (c.unsent() > 0) events |= EPOLLOUT;
    if (events == c.events) return;
    if (try_ctl(EPOLL_CTL_MOD, c.sock.fd(), events, c.id) != 0) {
      close(c, Level::Warn, fmt::format("cannot watch the connection: {}", errno_text(errno)));
      return;
    }
    c.events = events;
  }

  void reply(Conn& c, wire::Command command, const wire::Reply& r) {
    wire::Bytes frame = wire::encode_reply(command, r);
    c.out.insert(c.out.end(), frame.begin(), frame.end());
  }

  void reply_ok(Conn& c, wire::Command command) { reply(c, command, wire::Reply{}); }

  void reply_int(Conn& c, wire::Command command, int64_t v) {
    wire::Reply r;
    r.integer = v;
    reply(c, command, r);
  }

  void reply_value(Conn& c, wire::Command command, wire::Bytes v) {
    wire::Reply r;
    r.value = std::move(v);
    reply(c, command, r);
  }

  void store(const std::string& key, wire::Bytes value) {
    data_[key] = std::move(value);
    notify(key);
  }

  std::optional<wire::Bytes> lookup(const std::string& key) const {
    auto it = data_.find(key);
    if (it == data_.end()) return std::nullopt;
    return it->second;
  }

  std::vector<std::string> missing(const wire::Request& req) const {
    std::vector<std::string> out;
    if (req.command == wire::Command::Get) {
      if (!data_.contains(req.key)) out.push_back(req.key);
      return out;
    }
    for (const auto& k : req.keys) {
      if (!data_.contains(k)) out.push_back(k);
    }
    return out;
  }

  void execute(Conn& c, wire::Request req) {
    using wire::Command;
    switch (req.command) {
      case Command::Set:
        store(req.key, std::move(req.value));
        reply_ok(c, req.command);
        return;
      case Command::Get:
      case Command::Wait:
        if (missing(req).empty()) {
          answer_parked(c, req);
        } else {
          park(c, std::move(req));
        }
        return;
      case Command::Add: {
        int64_t result = 0;
        try {
          result = apply_add(lookup(req.key), req.delta, req.key);
        } catch (const ValueError& e) {
          wire::Reply r;
          r.status = wire::Status::Error;
          r.message = e.message();
          reply(c, req.command, r);
          return;
        }
        store(req.key, encode_counter(result));
        reply_int(c, req.command, result);
        return;
      }
      case Command::CompareSet: {
        CompareSetOutcome outcome = apply_compare_set(lookup(req.key), req.expected, req.value);
        if (outcome.store) store(req.key, outcome.result);
        reply_value(c, req.command, std::move(outcome.result));
        return;
      }
      case Command::Check:
        reply_int(c, req.command, missing(req).empty() ? 1 : 0);
        return;
      case Command::DeleteKey:
        reply_int(c, req.command, data_.erase(req.key) > 0 ? 1 : 0);
        return;
      case Command::NumKeys:
        reply_int(c, req.command, static_cast<int64_t>(data_.size()));
        return;
      case Command::Join:
        if (!c.joined) {
          c.joined = true;
          {
            std::lock_guard lock(joined_.mu);
            ++joined_.joined;
          }
          joined_.changed.notify_all();
        }
        reply_ok(c, req.command);
        return;
    }
  }

  // The Ok reply of a Get or Wait whose keys are all present.
  void answer_parked(Conn& c, const wire::Request& req) {
    if (req.command == wire::Command::Get) {
      reply_value(c, req.command, data_.at(req.key));
    } else {
      reply_ok(c, req.command);
    }
  }

  void park(Conn& c, wire::Request req) {
    // A timeout_ms past what milliseconds holds means "forever"; deadline_after saturates.
    const auto ms = milliseconds(static_cast<int64_t>(std::min<uint64_t>(req.timeout_ms, INT64_MAX)));
    c.parked = std::move(req);
    file_waiter(c);
    set_deadline(c, net::deadline_after(ms));
  }

  // Files a parked connection under its first missing key. One entry per parked
  // connection: a write to that key re-checks all of its keys (a key set earlier
  // may have been deleted since) and files it again if some are still missing.
  void file_waiter(Conn& c) {
    c.parked_on = missing(*c.parked).front();
    waiters_[c.parked_on].push_back(c.id);
  }

  void unfile_waiter(Conn& c) {
    if (c.parked_on.empty()) return;
    auto it = waiters_.find(c.parked_on);
    if (it != waiters_.end()) {
      std::erase(it->second, c.id);
      if (it->second.empty()) waiters_.erase(it);
    }
    c.parked_on.clear();
  }

  // A key was written: the connections parked on it get another look once the
  // current request is done (not recursively from inside it).
  void notify(const std::string& key) {
    auto it = waiters_.find(key);
    if (it == waiters_.end()) return;
    for (uint64_t id : it->second) {
      if (Conn* c = find(id)) {
        c->parked_on.clear();
        runnable_.push_back(id);
      }
    }
    waiters_.erase(it);
  }

  void drain_runnable() {
    while (!runnable_.empty()) {
      const uint64_t id = runnable_.front();
      runnable_.pop_front();
      Conn* c = find(id);
      if (c == nullptr || !c->parked || !c->parked_on.empty()) continue;
      if (!missing(*c->parked).empty()) {
        file_waiter(*c);
        continue;
      }
      answer_parked(*c, *c->parked);
      unpark(*c);
      if (!flush(*c)) continue;
      progress(id);  // requests that arrived behind the parked one
    }
  }

  void unpark(Conn& c) {
    unfile_waiter(c);
    clear_deadline(c);
    c.parked.reset();
  }

  void set_deadline(Conn& c, Deadline d) {
    clear_deadline(c);
    c.deadline = d;
    timers_.emplace(d, c.id);
  }

  void clear_deadline(Conn& c) {
    if (c.deadline) timers_.erase({*c.deadline, c.id});
    c.deadline.reset();
  }

  void expire_timers() {
    const auto now = Clock::now();
    if (accept_paused_ && now >= accept_resume_) {
      accept_paused_ = false;
      ctl(EPOLL_CTL_MOD, listener_.fd(), EPOLLIN, kListenerId);
    }
    while (!timers_.empty() && timers_.begin()->first <= now) {
      const uint64_t id = timers_.begin()->second;
      timers_.erase(timers_.begin());
      Conn* c = find(id);
      if (c == nullptr) continue;
      c->deadline.reset();
      if (!c->ready) {
        close(*c, Level::Warn,
              fmt::format("did not complete the auth handshake within {} ms", handshake_timeout_.count()));
        continue;
      }
      if (!c->parked) continue;
      wire::Reply r;
      r.keys = missing(*c->parked);
      if (r.keys.empty()) {
        // Set in this very iteration, just before its deadline: that is a success.
        answer_parked(*c, *c->parked);
      } else {
        r.status = wire::Status::Timeout;
        reply(*c, c->parked->command, r);
      }
      unpark(*c);
      if (!flush(*c)) continue;
      progress(id);  // requests that arrived behind the timed-out one
    }
  }

  // Closes a pending connection that the admission limits evicted.
  void shed(uint64_t id) {
    Conn* c = find(id);
    if (c == nullptr) return;
    // Once per server at warn: a flood would otherwise write a line per connection.
    const auto& limits = admission_.limits();
    close(*c, admission_.evicted() == 1 ? Level::Warn : Level::Debug,
          fmt::format("closed before its handshake: too many connections await the handshake (at most {} per "
                      "address, {} in all); the oldest makes room",
                      limits.per_source, limits.total));
  }

  void close(Conn& c, Level level, std::string_view why) {
    admission_.release(c.id);
    if (level == Level::Warn) {
      THD_LOG_WARN("store server {}: {}: {}", name_, c.sock.peer(), why);
    } else {
      THD_LOG_DEBUG("store server {}: {}: {}", name_, c.sock.peer(), why);
    }
    unfile_waiter(c);
    clear_deadline(c);
    // Closing the fd removes it from the epoll set as well; DEL first keeps that
    // true even if the fd were ever shared.
    epoll_event unused{};
    (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.sock.fd(), &unused);
    conns_.erase(c.id);
  }

  net::Socket listener_;
  net::AuthToken token_;  // each handshake holds a pointer to it
  milliseconds handshake_timeout_;
  JoinCounter& joined_;
  std::string name_;  // host:port, for logs
  net::UniqueFd epoll_;
  net::UniqueFd wake_;
  std::atomic<bool> stopping_{false};

  std::unordered_map<uint64_t, Conn> conns_;  // node-based: references stay valid
  net::HandshakeAdmission admission_;         // the connections still in the handshake
  uint64_t next_id_ = 2;                      // never reused
  std::set<std::pair<Deadline, uint64_t>> timers_;
  std::unordered_map<std::string, wire::Bytes> data_;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters_;
  std::deque<uint64_t> runnable_;
  bool accept_paused_ = false;
  Deadline accept_resume_{};
};

TCPStoreServer::TCPStoreServer(const std::string& host, uint16_t port, net::AuthToken token,
                               milliseconds handshake_timeout) {
  net::Socket listener = net::Socket::listen(host, port, "TCPStore");
  port_ = listener.local_port();
  endpoint_ = listener.peer();
  loop_ = std::make_unique<Loop>(std::move(listener), std::move(token), handshake_timeout, joined_);
  thread_ = std::thread([this] { loop_->run(); });
}

TCPStoreServer::~TCPStoreServer() {
  loop_->stop();
  thread_.join();
}

int TCPStoreServer::wait_for_joined(int count, Deadline deadline) {
  std::unique_lock lock(joined_.mu);
  joined_.changed.wait_until(lock, deadline, [&] { return joined_.joined >= count; });
  return joined_.joined;
}

}  // namespace thd::detail
