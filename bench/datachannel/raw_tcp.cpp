#include "bench/datachannel/raw_tcp.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace thd::bench::dc {
namespace {

using Clock = std::chrono::steady_clock;
using Nonce = std::array<uint8_t, 16>;

[[noreturn]] void fail(const std::string& what, int err) {
  throw std::runtime_error("raw tcp reference: " + what + ": " + std::strerror(err));
}

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) + 1 : 0;
}

sockaddr_in loopback(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

Fd tcp_socket() {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) fail("socket", errno);
  return fd;
}

// The data path's settings: nonblocking (the loops below spin on EAGAIN) and no
// Nagle delay on the small messages.
void set_data_mode(int fd) {
  const int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) fail("TCP_NODELAY", errno);
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) fail("O_NONBLOCK", errno);
}

// Blocking reads/writes of the set-up exchange, each bounded by poll().
void setup_io(int fd, uint8_t* p, size_t n, bool sending, Clock::time_point deadline) {
  while (n > 0) {
    pollfd pfd{fd, static_cast<short>(sending ? POLLOUT : POLLIN), 0};
    const int ready = ::poll(&pfd, 1, remaining_ms(deadline));
    if (ready == 0) throw std::runtime_error("raw tcp reference: timed out during set-up");
    if (ready < 0) {
      if (errno == EINTR) continue;
      fail("poll", errno);
    }
    const ssize_t r = sending ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (r == 0) throw std::runtime_error("raw tcp reference: connection closed during set-up");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      fail(sending ? "send" : "recv", errno);
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
}

std::vector<uint8_t> encode(uint16_t port, const Nonce& nonce) {
  std::vector<uint8_t> v(2 + nonce.size());
  v[0] = static_cast<uint8_t>(port >> 8);
  v[1] = static_cast<uint8_t>(port & 0xff);
  std::memcpy(v.data() + 2, nonce.data(), nonce.size());
  return v;
}

}  // namespace

RawTcpConnection RawTcpConnection::listen(Store& store, const std::string& key, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  Fd listener = tcp_socket();
  sockaddr_in addr = loopback(0);
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("bind", errno);
  if (::listen(listener.get(), 4) != 0) fail("listen", errno);
  socklen_t len = sizeof addr;
  if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) fail("getsockname", errno);
  Nonce nonce{};
  if (::getrandom(nonce.data(), nonce.size(), 0) != static_cast<ssize_t>(nonce.size())) fail("getrandom", errno);
  store.set(key, encode(ntohs(addr.sin_port), nonce));

  // Anyone on this host may connect to the port: the first connection that
  // presents the nonce is the peer, any other is dropped.
  for (;;) {
    pollfd pfd{listener.get(), POLLIN, 0};
    const int ready = ::poll(&pfd, 1, remaining_ms(deadline));
    if (ready == 0) throw std::runtime_error("raw tcp reference: the peer never connected");
    if (ready < 0) {
      if (errno == EINTR) continue;
      fail("poll", errno);
    }
    Fd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) continue;
    Nonce got{};
    try {
      setup_io(conn.get(), got.data(), got.size(), /*sending=*/false, deadline);
    } catch (const std::runtime_error&) {
      if (Clock::now() >= deadline) throw;
      continue;
    }
    if (got != nonce) continue;
    set_data_mode(conn.get());
    return RawTcpConnection(std::move(conn), timeout);
  }
}

RawTcpConnection RawTcpConnection::connect(Store& store, const std::string& key, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::vector<uint8_t> v = store.get(key, timeout);
  Nonce nonce{};
  if (v.size() != 2 + nonce.size()) throw std::runtime_error("raw tcp reference: bad address record in the store");
  const uint16_t port = static_cast<uint16_t>(v[0] << 8 | v[1]);
  std::memcpy(nonce.data(), v.data() + 2, nonce.size());
  Fd conn = tcp_socket();
  sockaddr_in addr = loopback(port);
  if (::connect(conn.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("connect", errno);
  setup_io(conn.get(), nonce.data(), nonce.size(), /*sending=*/true, deadline);
  set_data_mode(conn.get());
  return RawTcpConnection(std::move(conn), timeout);
}

void RawTcpConnection::send_all(std::span<const uint8_t> data) {
  const auto deadline = Clock::now() + timeout_;
  const uint8_t* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::send(fd_.get(), p, left, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      left -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (Clock::now() >= deadline) throw std::runtime_error("raw tcp reference: send timed out");
    } else {
      fail("send", n == 0 ? EPIPE : errno);
    }
  }
}

void RawTcpConnection::recv_all(std::span<uint8_t> data) {
  const auto deadline = Clock::now() + timeout_;
  uint8_t* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::recv(fd_.get(), p, left, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      left -= static_cast<size_t>(n);
    } else if (n == 0) {
      throw std::runtime_error("raw tcp reference: the peer closed the connection");
    } else if (errno == EAGAIN || errno == EINTR) {
      if (Clock::now() >= deadline) throw std::runtime_error("raw tcp reference: recv timed out");
    } else {
      fail("recv", errno);
    }
  }
}

}  // namespace thd::bench::dc
