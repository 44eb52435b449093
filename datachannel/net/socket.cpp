#include "datachannel/net/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <climits>
#include <memory>
#include <system_error>
#include <thread>

#include "datachannel/check.h"

namespace thd::net {
namespace {

using std::chrono::milliseconds;

std::string errno_text(int err) { return std::system_category().message(err); }

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const noexcept { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

// getaddrinfo for a TCP endpoint. EAI_AGAIN (resolver temporarily unavailable) is
// reported through `transient` so connect() can keep retrying; every other failure
// means the name is wrong and throws.
AddrInfoPtr resolve(const std::string& host, uint16_t port, bool passive, std::string_view op,
                    bool* transient = nullptr) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string service = std::to_string(port);
  addrinfo* result = nullptr;
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  if (rc == EAI_AGAIN && transient != nullptr) {
    *transient = true;
    return nullptr;
  }
  THD_CHECK(rc == 0, ConnectionError, std::string(op), "cannot resolve host '{}' (for {}): {}",
            host, format_endpoint(host, port), gai_strerror(rc));
  return AddrInfoPtr(result);
}

std::string format_sockaddr(const sockaddr* addr, socklen_t len) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(addr, len, host, sizeof(host), serv, sizeof(serv),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "<unknown peer>";
  }
  return format_endpoint(host, static_cast<uint16_t>(std::stoi(serv)));
}

void set_nodelay(int fd) {
  int one = 1;
  // Best effort: a socket without it still works, only with Nagle's latency.
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Errors after which another connect attempt may succeed: the server is not
// listening yet, or its backlog is momentarily full, or the route is coming up.
bool connect_error_is_transient(int err) {
  switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case ETIMEDOUT:
    case ENETUNREACH:
    case EHOSTUNREACH:
    case ENETDOWN:
    case EAGAIN:
    case EADDRNOTAVAIL:  // ephemeral ports exhausted for a moment
      return true;
    default:
      return false;
  }
}

// Waits until fd is ready for `events` or the deadline passes. Returns the revents,
// 0 on timeout. EINTR restarts the wait with the time that is left.
short poll_one(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (rc > 0) return p.revents;
    if (rc == 0) {
      if (Clock::now() >= deadline) return 0;
      continue;  // woke a hair early from rounding: wait out the rest
    }
    if (errno != EINTR) return POLLERR;
  }
}

// One connect attempt to one address, bounded by the deadline. Returns the
// connected fd, or an invalid one with the errno in *err.
UniqueFd connect_once(const addrinfo& ai, Deadline deadline, int* err) {
  UniqueFd fd(::socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol));
  if (!fd) {
    *err = errno;
    return {};
  }
  int rc;
  do {
    rc = ::connect(fd.get(), ai.ai_addr, ai.ai_addrlen);
  } while (rc != 0 && errno == EINTR);
  if (rc == 0) return fd;
  if (errno != EINPROGRESS) {
    *err = errno;
    return {};
  }
  short revents = poll_one(fd.get(), POLLOUT, deadline);
  if (revents == 0) {
    *err = ETIMEDOUT;
    return {};
  }
  int so_error = 0;
  socklen_t len = sizeof(so_error);
  if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
  if (so_error != 0) {
    *err = so_error;
    return {};
  }
  return fd;
}

}  // namespace

Deadline deadline_after(milliseconds timeout) {
  const auto now = Clock::now();
  if (timeout.count() < 0) return now;
  if (timeout >= std::chrono::duration_cast<milliseconds>(Deadline::max() - now)) return Deadline::max();
  return now + timeout;
}

Deadline coarse_deadline_after(milliseconds timeout) {
  // steady_clock is CLOCK_MONOTONIC; its coarse reading is the same clock as of
  // the last tick. Two ticks of margin: the tick that updates it may come late.
  static const std::chrono::nanoseconds margin = [] {
    timespec res{};
    if (::clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0) return std::chrono::nanoseconds(-1);
    return 2 * (std::chrono::seconds(res.tv_sec) + std::chrono::nanoseconds(res.tv_nsec));
  }();
  timespec ts{};
  if (margin.count() < 0 || ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0) return deadline_after(timeout);
  const Deadline now{std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                                 std::chrono::nanoseconds(ts.tv_nsec) + margin)};
  if (timeout.count() < 0) return now;
  if (timeout >= std::chrono::duration_cast<milliseconds>(Deadline::max() - now)) return Deadline::max();
  return now + timeout;
}

int poll_timeout_ms(Deadline deadline) {
  if (deadline == Deadline::max()) return -1;
  const auto now = Clock::now();
  if (now >= deadline) return 0;
  const auto left = std::chrono::ceil<milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<int64_t>(left, INT_MAX));
}

std::string format_endpoint(std::string_view host, uint16_t port) {
  if (host.find(':') != std::string_view::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Socket Socket::listen(const std::string& host, uint16_t port, std::string_view op, int backlog) {
  const std::string where = format_endpoint(host, port);
  AddrInfoPtr list = resolve(host, port, /*passive=*/true, op);
  int last_error = 0;
  for (const addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd) {
      last_error = errno;
      continue;
    }
    int one = 1;
    (void)setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.get(), backlog) != 0) {
      last_error = errno;
      continue;
    }
    Socket s(std::move(fd), "");
    s.peer_ = format_endpoint(host, s.local_port());
    return s;
  }
  THD_THROW(ConnectionError, std::string(op), "cannot listen on {}: {}", where, errno_text(last_error));
}

Socket Socket::connect(const std::string& host, uint16_t port, Deadline deadline, std::string_view op) {
  const std::string where = format_endpoint(host, port);
  const auto start = Clock::now();
  milliseconds backoff{10};
  std::string last_error = "no attempt was made";
  for (;;) {
    bool transient = false;
    AddrInfoPtr list = resolve(host, port, /*passive=*/false, op, &transient);
    if (transient) last_error = "the resolver is temporarily unavailable";
    // A name may resolve to several addresses (::1 and 127.0.0.1 for localhost):
    // try each, and give up early only if every one failed for good.
    int permanent_error = 0;
    for (const addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
      int err = 0;
      UniqueFd fd = connect_once(*ai, deadline, &err);
      if (fd) {
        set_nodelay(fd.get());
        return Socket(std::move(fd), where);
      }
      last_error = errno_text(err);
      if (connect_error_is_transient(err)) {
        transient = true;
      } else {
        permanent_error = err;
      }
    }
    THD_CHECK(transient || permanent_error == 0, ConnectionError, std::string(op), "cannot connect to {}: {}",
              where, errno_text(permanent_error));
    const auto now = Clock::now();
    if (now >= deadline) {
      THD_THROW(TimeoutError, std::string(op), "could not connect to {} within {} ms (last error: {})",
                where, std::chrono::duration_cast<milliseconds>(now - start).count(), last_error);
    }
    const auto left = std::chrono::ceil<milliseconds>(deadline - now);
    std::this_thread::sleep_for(std::min(backoff, left));
    backoff = std::min(backoff * 2, milliseconds{1000});
  }
}

Socket Socket::accept(int* error) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  for (;;) {
    int fd = ::accept4(fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      set_nodelay(fd);
      return Socket(UniqueFd(fd), format_sockaddr(reinterpret_cast<sockaddr*>(&addr), len));
    }
    if (errno == EINTR) continue;
    if (error != nullptr) *error = (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : errno;
    return {};
  }
}

IoResult Socket::send_some(std::span<const uint8_t> data) noexcept {
  for (;;) {
    // MSG_NOSIGNAL: a peer that went away must be an EPIPE error here, not a
    // SIGPIPE that kills the whole process.
    ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
    if (n >= 0) return {IoResult::Status::Ok, static_cast<size_t>(n), 0};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {IoResult::Status::WouldBlock, 0, 0};
    return {IoResult::Status::Error, 0, errno};
  }
}

IoResult Socket::recv_some(std::span<uint8_t> data) noexcept {
  for (;;) {
    ssize_t n = ::recv(fd_.get(), data.data(), data.size(), 0);
    if (n > 0) return {IoResult::Status::Ok, static_cast<size_t>(n), 0};
    if (n == 0) {
      if (data.empty()) return {IoResult::Status::Ok, 0, 0};
      return {IoResult::Status::Eof, 0, 0};
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {IoResult::Status::WouldBlock, 0, 0};
    return {IoResult::Status::Error, 0, errno};
  }
}

void Socket::send_all(std::span<const uint8_t> data, Deadline deadline, std::string_view op) {
  THD_CHECK(valid(), ConnectionError, std::string(op), "send to {} on a closed socket", peer_);
  size_t done = 0;
  while (done < data.size()) {
    IoResult r = send_some(data.subspan(done));
    switch (r.status) {
      case IoResult::Status::Ok:
        done += r.bytes;
        break;
      case IoResult::Status::WouldBlock:
        if (poll_one(fd_.get(), POLLOUT, deadline) == 0) {
          THD_THROW(TimeoutError, std::string(op), "timed out sending to {} ({} of {} bytes sent)", peer_,
                    done, data.size());
        }
        break;
      case IoResult::Status::Eof:  // not produced by send; treated as a loss
      case IoResult::Status::Error:
        if (r.error == EPIPE || r.error == ECONNRESET || r.status == IoResult::Status::Eof) {
          THD_THROW(PeerLost, std::string(op), "connection to {} was closed by the peer while sending", peer_);
        }
        THD_THROW(ConnectionError, std::string(op), "send to {} failed: {}", peer_, errno_text(r.error));
    }
  }
}

void Socket::recv_exact(std::span<uint8_t> data, Deadline deadline, std::string_view op) {
  THD_CHECK(valid(), ConnectionError, std::string(op), "receive from {} on a closed socket", peer_);
  size_t done = 0;
  while (done < data.size()) {
    IoResult r = recv_some(data.subspan(done));
    switch (r.status) {
      case IoResult::Status::Ok:
        done += r.bytes;
        break;
      case IoResult::Status::WouldBlock:
        if (poll_one(fd_.get(), POLLIN, deadline) == 0) {
          THD_THROW(TimeoutError, std::string(op), "timed out waiting for {} ({} of {} bytes received)", peer_,
                    done, data.size());
        }
        break;
      case IoResult::Status::Eof:
        THD_THROW(PeerLost, std::string(op), "connection closed by {} ({} of {} bytes received)", peer_, done,
                  data.size());
      case IoResult::Status::Error:
        if (r.error == ECONNRESET) {
          THD_THROW(PeerLost, std::string(op), "connection reset by {} ({} of {} bytes received)", peer_, done,
                    data.size());
        }
        THD_THROW(ConnectionError, std::string(op), "receive from {} failed: {}", peer_, errno_text(r.error));
    }
  }
}

uint16_t Socket::local_port() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  THD_CHECK(getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0, ConnectionError,
            "socket.local_port", "getsockname failed: {}", errno_text(errno));
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
}

}  // namespace thd::net
