// TCP sockets for the Store and the TCP DataChannel backend.
//
// Every Socket is nonblocking and close-on-exec from the moment it is created, with
// TCP_NODELAY set on connected ones (the store and the backend send small
// request/reply messages whose latency Nagle would add to). Blocking calls are
// built from poll() with a deadline, so no call can hang past what its caller
// allows; event loops use the *_some calls, which never block and never throw for
// the ordinary outcomes (would-block, EOF). Errors name the op and host:port:
//   thd::TimeoutError    the deadline passed
//   thd::PeerLost        the peer closed or reset an established connection
//   thd::ConnectionError anything else (refused past the deadline, bad address, ...)
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "datachannel/net/fd.h"

namespace thd::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// now + timeout, saturating: a timeout of milliseconds::max() means "never".
Deadline deadline_after(std::chrono::milliseconds timeout);
// The same, read from the kernel's coarse clock (a few ns instead of a clock read
// that is a measurable part of a small message's round trip), rounded up by two
// of its ticks: never earlier than deadline_after, at most 2-8 ms later.
// For deadlines made once per message.
Deadline coarse_deadline_after(std::chrono::milliseconds timeout);
// What is left until `deadline` as a poll() timeout: rounded up to whole
// milliseconds (so a poll never returns just before the deadline and spins), 0 once
// passed, -1 (forever) for a saturated deadline.
int poll_timeout_ms(Deadline deadline);

// "host:port", with IPv6 literals bracketed: "[::1]:29500".
std::string format_endpoint(std::string_view host, uint16_t port);

// The outcome of one nonblocking send or receive.
struct IoResult {
  enum class Status { Ok, WouldBlock, Eof, Error };
  Status status = Status::Ok;
  size_t bytes = 0;  // moved by this call (Ok only)
  int error = 0;     // errno (Error only)
};

class Socket {
 public:
  Socket() = default;
  Socket(UniqueFd fd, std::string peer) : fd_(std::move(fd)), peer_(std::move(peer)) {}

  Socket(Socket&&) noexcept = default;
  Socket& operator=(Socket&&) noexcept = default;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // A listening socket on host:port (host a name or a numeric address; port 0
  // picks an ephemeral port, read it back with local_port()). SO_REUSEADDR is set
  // so a restarted server can rebind a port whose old connections are in
  // TIME_WAIT; SO_REUSEPORT is not, so two live servers never share a port.
  static Socket listen(const std::string& host, uint16_t port, std::string_view op,
                       int backlog = 1024);

  // Connects to host:port. Refused, reset and unreachable attempts are retried
  // with exponential backoff (10 ms doubling to 1 s) until `deadline`, because the
  // server may simply not be up yet; past the deadline this throws TimeoutError
  // with the last error seen. Errors that retrying cannot fix (a name that does
  // not resolve, a bad address family) throw ConnectionError at once.
  static Socket connect(const std::string& host, uint16_t port, Deadline deadline,
                        std::string_view op);

  // One pending connection from a listening socket, or an invalid Socket when
  // none is pending. Transient accept errors (the peer gave up, fd limits) are
  // returned in `error` with an invalid Socket; the caller decides whether to back off.
  Socket accept(int* error = nullptr);

  // Blocking transfers of exactly data.size() bytes, or a throw (see the top).
  void send_all(std::span<const uint8_t> data, Deadline deadline, std::string_view op);
  void recv_exact(std::span<uint8_t> data, Deadline deadline, std::string_view op);

  // One nonblocking send()/recv(): EINTR is retried, EAGAIN is WouldBlock, a
  // zero-byte read of a nonempty buffer is Eof. Never throws.
  IoResult send_some(std::span<const uint8_t> data) noexcept;
  IoResult recv_some(std::span<uint8_t> data) noexcept;

  // The bound port (listening sockets) or the local port (connected ones).
  uint16_t local_port() const;

  int fd() const noexcept { return fd_.get(); }
  bool valid() const noexcept { return fd_.valid(); }
  // The remote endpoint ("127.0.0.1:5000"), or the bound one for a listener; for
  // error and log messages.
  const std::string& peer() const noexcept { return peer_; }
  void close() noexcept { fd_.reset(); }

 private:
  UniqueFd fd_;
  std::string peer_;
};

}  // namespace thd::net
