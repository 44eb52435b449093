#include <gtest/gtest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <numeric>
#include <thread>

#include "datachannel/net/socket.h"
#include "datachannel/test_util.h"

namespace thd {
namespace {

using namespace std::chrono_literals;
using net::Socket;
using test::in;

// A connected pair over loopback: {client, server side}.
std::pair<Socket, Socket> connected_pair() {
  Socket listener = Socket::listen("127.0.0.1", 0, "test");
  Socket client = Socket::connect("127.0.0.1", listener.local_port(), in(test::kLong), "test");
  Socket server;
  const auto deadline = in(test::kLong);
  while (!server.valid() && net::Clock::now() < deadline) {
    server = listener.accept();
    if (!server.valid()) std::this_thread::sleep_for(1ms);
  }
  return {std::move(client), std::move(server)};
}

TEST(Socket, ListenOnEphemeralPortReportsIt) {
  Socket listener = Socket::listen("127.0.0.1", 0, "test");
  EXPECT_TRUE(listener.valid());
  EXPECT_NE(listener.local_port(), 0);
  EXPECT_EQ(listener.peer(), "127.0.0.1:" + std::to_string(listener.local_port()));
}

TEST(Socket, ListenOnABusyPortNamesIt) {
  Socket first = Socket::listen("127.0.0.1", 0, "test");
  const uint16_t port = first.local_port();
  THD_EXPECT_THROW_MSG(Socket::listen("127.0.0.1", port, "test.listen"), ConnectionError,
                   "cannot listen on 127.0.0.1:" + std::to_string(port));
}

TEST(Socket, ConnectedSocketsAreCloexecNonblockingNodelay) {
  auto [client, server] = connected_pair();
  ASSERT_TRUE(server.valid());
  for (const Socket* s : {&client, &server}) {
    EXPECT_TRUE(fcntl(s->fd(), F_GETFD) & FD_CLOEXEC);
    EXPECT_TRUE(fcntl(s->fd(), F_GETFL) & O_NONBLOCK);
    int nodelay = 0;
    socklen_t len = sizeof(nodelay);
    ASSERT_EQ(getsockopt(s->fd(), IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
    EXPECT_NE(nodelay, 0);
  }
  EXPECT_EQ(client.peer(), "127.0.0.1:" + std::to_string(server.local_port()));
}

TEST(Socket, SendAllRecvExactMoveLargeBuffers) {
  auto [client, server] = connected_pair();
  ASSERT_TRUE(server.valid());
  // Larger than the socket buffers, so both sides must wait for the other.
  std::vector<uint8_t> data(8 << 20);
  std::iota(data.begin(), data.end(), uint8_t{0});
  std::thread sender([&, &client = client] { client.send_all(data, in(test::kLong), "test.send"); });
  std::vector<uint8_t> got(data.size());
  server.recv_exact(got, in(test::kLong), "test.recv");
  sender.join();
  EXPECT_EQ(got, data);
}

TEST(Socket, RecvTimesOutAtTheDeadline) {
  auto [client, server] = connected_pair();
  ASSERT_TRUE(server.valid());
  std::vector<uint8_t> buf(4);
  const auto start = net::Clock::now();
  THD_EXPECT_THROW_MSG(server.recv_exact(buf, in(100ms), "test.recv"), TimeoutError, "test.recv: timed out");
  const auto took = net::Clock::now() - start;
  EXPECT_GE(took, 95ms);
  EXPECT_LT(took, 2s);
}

TEST(Socket, RecvFromAClosedPeerIsPeerLost) {
  auto [client, server] = connected_pair();
  ASSERT_TRUE(server.valid());
  const uint8_t two[2] = {1, 2};
  client.send_all(two, in(test::kLong), "test");
  client.close();
  std::vector<uint8_t> buf(4);
  THD_EXPECT_THROW_MSG(server.recv_exact(buf, in(test::kLong), "test.recv"), PeerLost, "2 of 4 bytes received");
}

TEST(Socket, SendToAClosedPeerIsPeerLostNotSigpipe) {
  auto [client, server] = connected_pair();
  ASSERT_TRUE(server.valid());
  server.close();
  std::vector<uint8_t> data(1 << 20, 7);
  // The first sends may land in the buffers; a later one hits the reset. SIGPIPE
  // would kill the test binary instead of throwing.
  EXPECT_THROW(
      {
        for (int i = 0; i < 64; ++i) client.send_all(data, in(test::kLong), "test.send");
      },
      PeerLost);
}

TEST(Socket, ConnectRetriesUntilTheServerIsUp) {
  const uint16_t port = test::free_port();
  Socket listener;
  std::thread late([&] {
    std::this_thread::sleep_for(150ms);
    listener = Socket::listen("127.0.0.1", port, "test");
  });
  Socket client;
  EXPECT_NO_THROW(client = Socket::connect("127.0.0.1", port, in(test::kLong), "test.connect"));
  late.join();
  EXPECT_TRUE(client.valid());
}

TEST(Socket, ConnectGivesUpAtTheDeadlineNamingTheEndpoint) {
  const uint16_t port = test::free_port();
  const auto start = net::Clock::now();
  THD_EXPECT_THROW_MSG(Socket::connect("127.0.0.1", port, in(200ms), "test.connect"), TimeoutError,
                   "could not connect to 127.0.0.1:" + std::to_string(port));
  const auto took = net::Clock::now() - start;
  EXPECT_GE(took, 190ms);
  EXPECT_LT(took, 2s);
}

TEST(Socket, AcceptWithNothingPendingReturnsAnInvalidSocket) {
  Socket listener = Socket::listen("127.0.0.1", 0, "test");
  int err = -1;
  EXPECT_FALSE(listener.accept(&err).valid());
  EXPECT_EQ(err, 0);
}

TEST(Socket, DeadlineHelpers) {
  EXPECT_EQ(net::deadline_after(std::chrono::milliseconds::max()), net::Deadline::max());
  EXPECT_EQ(net::poll_timeout_ms(net::Deadline::max()), -1);
  EXPECT_EQ(net::poll_timeout_ms(net::Clock::now() - 1s), 0);
  const int left = net::poll_timeout_ms(net::Clock::now() + 1500us);
  EXPECT_GE(left, 1);  // rounded up, never 0 before the deadline
  EXPECT_LE(left, 2);
  EXPECT_EQ(net::format_endpoint("::1", 80), "[::1]:80");
  EXPECT_EQ(net::format_endpoint("localhost", 80), "localhost:80");
}

// Requests take their deadlines from the coarse clock: never before the precise
// one, and late by at most its tick.
TEST(Socket, CoarseDeadlinesAreNeverEarlyAndAtMostATickLate) {
  EXPECT_EQ(net::coarse_deadline_after(std::chrono::milliseconds::max()), net::Deadline::max());
  for (int i = 0; i < 1000; ++i) {
    const net::Deadline precise_before = net::deadline_after(100ms);
    const net::Deadline coarse = net::coarse_deadline_after(100ms);
    const net::Deadline precise_after = net::deadline_after(100ms);
    EXPECT_GE(coarse, precise_before);
    EXPECT_LE(coarse, precise_after + 20ms);
  }
  const net::Deadline now_ish = net::coarse_deadline_after(-1ms);
  EXPECT_LE(now_ish, net::Clock::now() + 20ms);
}

}  // namespace
}  // namespace thd
