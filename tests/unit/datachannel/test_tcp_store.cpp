// TCPStore beyond the common contract: connecting, authentication, and a server
// that hostile or broken clients cannot crash or stall.
#include <gtest/gtest.h>

#include <poll.h>

#include <atomic>
#include <cstring>
#include <thread>

#include <thd/store.h>

#include "datachannel/net/auth.h"
#include "datachannel/store/tcp_store_wire.h"
#include "datachannel/test_util.h"
#include "tensor/log.h"

namespace thd {
namespace {

using namespace std::chrono_literals;
using net::Socket;
using test::in;
namespace wire = detail::store_wire;

std::unique_ptr<TCPStore> make_server(std::chrono::milliseconds handshake_timeout = 5s) {
  return std::make_unique<TCPStore>(TCPStoreOptions{.port = 0,
                                                    .is_server = true,
                                                    .timeout = test::kLong,
                                                    .token = test::kToken,
                                                    .handshake_timeout = handshake_timeout});
}

std::unique_ptr<TCPStore> make_client(uint16_t port, std::string token = test::kToken,
                                      std::chrono::milliseconds timeout = test::kLong) {
  return std::make_unique<TCPStore>(TCPStoreOptions{.port = port, .timeout = timeout, .token = std::move(token)});
}

Socket raw_connect(uint16_t port) { return Socket::connect("127.0.0.1", port, in(test::kLong), "test.raw"); }

// A raw connection that has passed the handshake, for sending frames by hand.
Socket authenticated(uint16_t port) {
  Socket s = raw_connect(port);
  net::client_handshake(s, net::AuthToken(test::kToken, "test"), in(test::kLong), "test.raw");
  return s;
}


// The server keeps answering well-behaved clients.
void expect_serving(uint16_t port) {
  auto c = make_client(port);
  c->set("still", "serving");
  EXPECT_EQ(c->get_string("still"), "serving");
}

wire::Bytes frame_of(const std::vector<uint8_t>& body) {
  wire::Bytes f;
  const auto n = static_cast<uint32_t>(body.size());
  for (int i = 0; i < 4; ++i) f.push_back(static_cast<uint8_t>(n >> (8 * i)));
  for (uint8_t b : body) f.push_back(b);
  return f;
}

TEST(TCPStore, ServerPicksAPortAndServesItsOwnClient) {
  auto server = make_server();
  EXPECT_TRUE(server->is_server());
  EXPECT_NE(server->port(), 0);
  EXPECT_EQ(server->host(), "127.0.0.1");
  server->set("k", "v");
  auto client = make_client(server->port());
  EXPECT_FALSE(client->is_server());
  EXPECT_EQ(client->port(), server->port());
  EXPECT_EQ(client->get_string("k"), "v");
}

TEST(TCPStore, ClientStartedBeforeTheServerRetriesUntilItIsUp) {
  const uint16_t port = test::free_port();
  std::unique_ptr<TCPStore> server;
  std::thread late([&] {
    std::this_thread::sleep_for(200ms);
    server = std::make_unique<TCPStore>(
        TCPStoreOptions{.port = port, .is_server = true, .timeout = test::kLong, .token = test::kToken});
    server->set("ready", "yes");
  });
  auto client = make_client(port);  // blocks, retrying, until the server listens
  EXPECT_EQ(client->get_string("ready"), "yes");
  late.join();
}

TEST(TCPStore, ClientWithoutAServerTimesOutNamingTheAddress) {
  const uint16_t port = test::free_port();
  const auto start = std::chrono::steady_clock::now();
  THD_EXPECT_THROW_MSG(make_client(port, test::kToken, 200ms), TimeoutError,
                   "could not connect to 127.0.0.1:" + std::to_string(port));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(TCPStore, ServerWaitsForWorldSizeClients) {
  const uint16_t port = test::free_port();
  std::thread workers([&] {
    auto a = make_client(port);
    auto b = make_client(port);
    a->wait({"released"});
  });
  TCPStore server(TCPStoreOptions{
      .port = port, .is_server = true, .world_size = 3, .timeout = test::kLong, .token = test::kToken});
  server.set("released", "1");  // only reached once both workers connected
  workers.join();

  THD_EXPECT_THROW_MSG(TCPStore(TCPStoreOptions{.port = 0, .is_server = true, .world_size = 2, .timeout = 200ms,
                                            .token = test::kToken}),
                   TimeoutError, "only 1 of 2 processes connected");
}

TEST(TCPStore, OptionsAreChecked) {
  THD_EXPECT_THROW_MSG(TCPStore(TCPStoreOptions{.port = 0, .token = test::kToken}), ValueError,
                   "needs the server's port");
  THD_EXPECT_THROW_MSG(TCPStore(TCPStoreOptions{.is_server = true, .world_size = 0, .token = test::kToken}), ValueError,
                   "world_size must be >= 1");
  THD_EXPECT_THROW_MSG(TCPStore(TCPStoreOptions{.host = "127.0.0.1", .port = 1, .timeout = -1ms}), ValueError,
                   "timeout must be >= 0");
}

TEST(TCPStore, MissingTokenIsAnAuthError) {
  // The token comes from the environment when options have none: clear it in a
  // child process only.
  test::Children children;
  children.spawn([] {
    ::unsetenv("THD_AUTH_TOKEN");
    ::unsetenv("THD_AUTH_TOKEN_FILE");
    try {
      TCPStore s(TCPStoreOptions{.is_server = true, .timeout = 1s});
    } catch (const AuthError& e) {
      return std::string(e.what()).find("no auth token") != std::string::npos ? 0 : 2;
    }
    return 1;
  });
  EXPECT_EQ(children.wait_all(), std::vector<int>{0});
}

TEST(TCPStore, WrongTokenIsRefusedAndTheServerKeepsServing) {
  auto server = make_server();
  THD_EXPECT_THROW_MSG(make_client(server->port(), "not-the-token"), AuthError, "refused this process's auth token");
  expect_serving(server->port());
}

TEST(TCPStore, GarbageInsteadOfAHandshakeIsDropped) {
  auto server = make_server();
  Socket raw = raw_connect(server->port());
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(200, 'A');
  raw.send_all({reinterpret_cast<const uint8_t*>(http.data()), http.size()}, in(test::kLong), "test");
  EXPECT_TRUE(test::closed_by_peer(raw));
  expect_serving(server->port());
}

TEST(TCPStore, ReplayedHandshakeIsRefused) {
  auto server = make_server();
  net::AuthToken token(test::kToken, "test");
  // A legitimate handshake, recorded.
  Socket first = raw_connect(server->port());
  std::vector<uint8_t> hello(net::kServerHelloBytes);
  first.recv_exact(hello, in(test::kLong), "test");
  net::Nonce server_nonce, client_nonce = net::random_nonce();
  std::memcpy(server_nonce.data(), hello.data() + 8, 32);
  std::vector<uint8_t> recorded(net::kClientHelloBytes);
  std::memcpy(recorded.data(), hello.data(), 8);  // magic and version
  std::memcpy(recorded.data() + 8, client_nonce.data(), 32);
  const net::Mac proof = net::client_proof(token, server_nonce, client_nonce);
  std::memcpy(recorded.data() + 40, proof.data(), 32);
  first.send_all(recorded, in(test::kLong), "test");
  std::vector<uint8_t> finish(net::kServerFinishBytes);
  first.recv_exact(finish, in(test::kLong), "test");
  ASSERT_EQ(finish[0], static_cast<uint8_t>(net::HandshakeStatus::Ok));

  // The same bytes on a new connection answer a different nonce: refused.
  Socket replay = raw_connect(server->port());
  replay.recv_exact(hello, in(test::kLong), "test");
  replay.send_all(recorded, in(test::kLong), "test");
  replay.recv_exact(finish, in(test::kLong), "test");
  EXPECT_EQ(finish[0], static_cast<uint8_t>(net::HandshakeStatus::BadProof));
  EXPECT_TRUE(test::closed_by_peer(replay));
  expect_serving(server->port());
}

TEST(TCPStore, SilentClientIsDroppedAtTheHandshakeDeadlineWithoutStallingOthers) {
  const auto start = std::chrono::steady_clock::now();
  auto server = make_server(/*handshake_timeout=*/1000ms);
  Socket silent = raw_connect(server->port());
  // Others are served while the silent one holds its connection open.
  expect_serving(server->port());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 900ms);
  EXPECT_FALSE(test::closed_by_peer(silent, 0ms)) << "dropped before its deadline";
  EXPECT_TRUE(test::closed_by_peer(silent, 3s));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 1000ms);
  // Its handshake now fails cleanly instead of hanging.
  EXPECT_THROW(net::client_handshake(silent, net::AuthToken(test::kToken, "test"), in(1s), "test"), Error);
}

TEST(TCPStore, OversizedFrameDropsOnlyThatClient) {
  auto server = make_server();
  auto bystander = make_client(server->port());
  Socket bad = authenticated(server->port());
  const uint32_t too_big = wire::kMaxMessageBytes + 1;
  uint8_t prefix[4];
  for (int i = 0; i < 4; ++i) prefix[i] = static_cast<uint8_t>(too_big >> (8 * i));
  bad.send_all(prefix, in(test::kLong), "test");
  EXPECT_TRUE(test::closed_by_peer(bad));
  bystander->set("after", "ok");
  EXPECT_EQ(bystander->get_string("after"), "ok");
}

TEST(TCPStore, MalformedFramesDropOnlyThatClient) {
  auto server = make_server();
  auto bystander = make_client(server->port());
  const std::vector<std::vector<uint8_t>> frames = {
      frame_of({}),                                   // empty body
      frame_of({0xEE}),                               // unknown command
      frame_of({0}),                                  // command 0
      frame_of({1, 100, 0, 0, 0, 'k'}),               // Set: key length past the end
      frame_of({8, 0}),                               // NumKeys with a trailing byte
      frame_of({6, 0xff, 0xff, 0xff, 0xff}),          // Check: 4 billion keys
  };
  for (const auto& f : frames) {
    Socket bad = authenticated(server->port());
    bad.send_all(f, in(test::kLong), "test");
    EXPECT_TRUE(test::closed_by_peer(bad)) << "frame of " << f.size() << " bytes was not dropped";
  }
  bystander->set("after", "ok");
  EXPECT_EQ(bystander->get_string("after"), "ok");
  EXPECT_EQ(bystander->num_keys(), 1);
}

TEST(TCPStore, ParkedGetDoesNotBlockOtherClients) {
  auto server = make_server();
  auto waiter = make_client(server->port());
  std::thread blocked([&] { EXPECT_EQ(waiter->get_string("later"), "now"); });
  std::this_thread::sleep_for(50ms);
  for (int i = 0; i < 20; ++i) server->add("busy", 1);
  EXPECT_EQ(server->add("busy", 0), 20);
  server->set("later", "now");
  blocked.join();
}

TEST(TCPStore, ManyParkedClientsAreAllWokenByOneSet) {
  auto server = make_server();
  constexpr int kClients = 24;
  std::vector<std::unique_ptr<TCPStore>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(make_client(server->port()));
  std::atomic<int> woken{0};
  std::vector<std::thread> threads;
  for (auto& c : clients) {
    threads.emplace_back([&woken, &c] {
      if (c->get_string("go") == "now") ++woken;
    });
  }
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(woken.load(), 0);
  server->set("go", "now");
  for (auto& t : threads) t.join();
  EXPECT_EQ(woken.load(), kClients);
}

TEST(TCPStore, PipelinedRequestsAreAnsweredInOrder) {
  auto server = make_server();
  Socket raw = authenticated(server->port());
  // A Get that must park, then a NumKeys behind it, sent together.
  wire::Request get;
  get.command = wire::Command::Get;
  get.key = "k";
  get.timeout_ms = 10000;
  wire::Request count;
  count.command = wire::Command::NumKeys;
  wire::Bytes both = wire::encode_request(get);
  const wire::Bytes second = wire::encode_request(count);
  both.insert(both.end(), second.begin(), second.end());
  raw.send_all(both, in(test::kLong), "test");
  auto read_reply = [&](wire::Command command) {
    uint8_t prefix[4];
    raw.recv_exact(prefix, in(test::kLong), "test");
    wire::Bytes body(wire::decode_length(prefix));
    raw.recv_exact(body, in(test::kLong), "test");
    wire::Reply r;
    std::string why;
    EXPECT_TRUE(wire::decode_reply(command, body, &r, &why)) << why;
    return r;
  };
  // Nothing comes back while the Get is parked, not even the NumKeys answer.
  std::this_thread::sleep_for(50ms);
  uint8_t byte;
  net::IoResult early = raw.recv_some({&byte, 1});
  EXPECT_EQ(early.status, net::IoResult::Status::WouldBlock);
  server->set("k", "v");
  wire::Reply first = read_reply(wire::Command::Get);
  EXPECT_EQ(first.status, wire::Status::Ok);
  EXPECT_EQ(first.value, (wire::Bytes{'v'}));
  wire::Reply then = read_reply(wire::Command::NumKeys);
  EXPECT_EQ(then.status, wire::Status::Ok);
  EXPECT_EQ(then.integer, 1);
}

TEST(TCPStore, ClientsFailFastWhenTheServerGoesAway) {
  auto server = make_server();
  auto client = make_client(server->port());
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    server.reset();
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(client->get("never"), ConnectionError);  // PeerLost is one
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  stopper.join();
  // The next call tries to reconnect, and fails within the store timeout.
  client->set_timeout(100ms);
  EXPECT_THROW(client->set("x", "y"), TimeoutError);
}

TEST(TCPStore, MessageOverTheLimitIsRefusedBeforeSending) {
  auto server = make_server();
  std::vector<uint8_t> huge(wire::kMaxMessageBytes + 1);
  THD_EXPECT_THROW_MSG(server->set("huge", huge), ValueError, "at most");
  EXPECT_EQ(server->num_keys(), 0);  // and the connection is still good
}

TEST(TCPStore, ProcessesIncrementingOneCounterGetAnExactTotal) {
  auto server = make_server();
  const uint16_t port = server->port();
  constexpr int kProcs = 4;
  constexpr int kAdds = 50;
  test::Children children;
  for (int p = 0; p < kProcs; ++p) {
    children.spawn([port] {
      auto c = make_client(port);
      for (int i = 0; i < kAdds; ++i) c->add("counter", 1);
      c->add("done", 1);
      return 0;
    });
  }
  EXPECT_EQ(children.wait_all(), std::vector<int>(kProcs, 0));
  EXPECT_EQ(server->add("counter", 0), kProcs * kAdds);
  EXPECT_EQ(server->add("done", 0), kProcs);
}

// ctest runs this with THD_LOG_LEVEL=warn (datachannel.refusals_are_logged); under
// the default level nothing is logged and it skips.
TEST(TCPStoreLog, RefusalsAreLoggedWithThePeerButNeverTheToken) {
  if (detail::log_level() > detail::LogLevel::Warn) GTEST_SKIP() << "needs THD_LOG_LEVEL=warn";
  auto server = make_server(/*handshake_timeout=*/200ms);
  const std::string wrong = "a-wrong-token-4242";
  testing::internal::CaptureStderr();
  EXPECT_THROW(make_client(server->port(), wrong), AuthError);
  Socket garbage = raw_connect(server->port());
  const std::vector<uint8_t> junk(net::kClientHelloBytes, 'J');
  garbage.send_all(junk, in(test::kLong), "test");
  EXPECT_TRUE(test::closed_by_peer(garbage));
  Socket silent = raw_connect(server->port());
  EXPECT_TRUE(test::closed_by_peer(silent));
  const std::string log = testing::internal::GetCapturedStderr();
  const std::string from = "refused the connection from 127.0.0.1:";
  EXPECT_NE(log.find(from), std::string::npos) << log;
  EXPECT_NE(log.find("wrong auth token"), std::string::npos) << log;
  EXPECT_NE(log.find("bad handshake magic"), std::string::npos) << log;
  EXPECT_NE(log.find("did not complete the auth handshake within 200 ms"), std::string::npos) << log;
  EXPECT_EQ(log.find(test::kToken), std::string::npos) << log;
  EXPECT_EQ(log.find(wrong), std::string::npos) << log;
}

TEST(TCPStoreWire, RequestsRoundTrip) {
  wire::Request r;
  r.command = wire::Command::CompareSet;
  r.key = "k";
  r.expected = {1, 2};
  r.value = {3};
  wire::Bytes f = wire::encode_request(r);
  ASSERT_EQ(wire::decode_length(f.data()), f.size() - 4);
  wire::Request back;
  std::string why;
  ASSERT_TRUE(wire::decode_request(std::span(f).subspan(4), &back, &why)) << why;
  EXPECT_EQ(back.command, r.command);
  EXPECT_EQ(back.key, "k");
  EXPECT_EQ(back.expected, r.expected);
  EXPECT_EQ(back.value, r.value);

  r = wire::Request{};
  r.command = wire::Command::Wait;
  r.keys = {"a", "", "ccc"};
  r.timeout_ms = 1234;
  f = wire::encode_request(r);
  ASSERT_TRUE(wire::decode_request(std::span(f).subspan(4), &back, &why)) << why;
  EXPECT_EQ(back.keys, r.keys);
  EXPECT_EQ(back.timeout_ms, 1234u);

  // Every proper prefix of a body is refused.
  for (size_t n = 0; n + 4 < f.size(); ++n) {
    EXPECT_FALSE(wire::decode_request(std::span(f).subspan(4, n), &back, &why)) << n;
  }
}

}  // namespace
}  // namespace thd
