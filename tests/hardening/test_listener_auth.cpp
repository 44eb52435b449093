// Every thd listener refuses connections that do not prove the token — garbage
// before the handshake, no handshake at all, the wrong token, and a real client's
// handshake recorded and replayed (the server's fresh nonce makes it worthless) —
// and nothing such a connection sent is acted on: the store's keys, a channel's
// messages and a pool's sessions are unchanged. The listeners: the TCPStore
// server, the tcp DataChannel's mesh listener while the ranks connect, and a
// worker pool's store (the one port a pool listens on between sessions).
// tests/unit/datachannel/test_auth.cpp covers the handshake by hand and
// tests/conformance/test_auth.cpp junk and wrong tokens at set-up.
#include <gtest/gtest.h>

#include <thread>

#include <thd/datachannel.h>
#include <thd/distributed.h>
#include <thd/store.h>

#include "attacks.h"
#include "datachannel/envelope.h"
#include "datachannel/store/tcp_store_wire.h"
#include "datachannel/tcp/mesh.h"
#include "datachannel/wire.h"
#include "fault_checks.h"
#include "pool_process.h"
#include "raw_peer.h"
#include "test_util.h"

namespace thd::test {
namespace {

using namespace std::chrono_literals;
namespace wire = detail::store_wire;
namespace tcp = detail::tcp;

constexpr milliseconds kTimeout{10000};

TCPStoreOptions client_of(uint16_t port) {
  return {.port = port, .timeout = kTimeout, .token = std::string(kToken)};
}

// What an intruder asks of a store: a key of its own and a bump of a counter. More
// bytes than a ClientHello, so a server that waits for a whole one before it looks
// (it closes the connection at its handshake timeout otherwise) refuses at once.
std::vector<uint8_t> store_requests(const std::string& key, const std::string& counter) {
  wire::Request set;
  set.command = wire::Command::Set;
  set.key = key;
  set.value = std::vector<uint8_t>(64, 'x');
  wire::Request add;
  add.command = wire::Command::Add;
  add.key = counter;
  add.delta = 1000;
  std::vector<uint8_t> out = wire::encode_request(set);
  const std::vector<uint8_t> second = wire::encode_request(add);
  out.insert(out.end(), second.begin(), second.end());
  return out;
}

TEST(ListenerAuth, StoreServerActsOnNothingUnproven) {
  TCPStore server({.port = 0, .is_server = true, .timeout = kTimeout, .token = std::string(kToken)});
  // A real client's session through a recording proxy: its handshake, a counter
  // bump and a key.
  std::vector<uint8_t> recorded;
  {
    RecordingProxy proxy(server.port());
    {
      TCPStore client(client_of(proxy.port()));
      EXPECT_EQ(client.add("counter", 1), 1);
      client.set("recorded", "1");
    }
    recorded = proxy.client_bytes(0);
  }
  const int64_t keys = server.num_keys();
  for (Attack attack : kAttacks) {
    const std::string key = "intruder/" + attack_name(attack);
    EXPECT_TRUE(refused(server.port(), attack, store_requests(key, "counter"), recorded));
    TCPStore client(client_of(server.port()));
    EXPECT_FALSE(client.check({key})) << attack_name(attack) << ": the intruder's key was set";
    EXPECT_EQ(client.add("counter", 0), 1) << attack_name(attack) << ": the counter moved";
    EXPECT_EQ(client.num_keys(), keys) << attack_name(attack);
  }
}

// Ranks 0 and 1 of a tcp DataChannel of three, rank 1 reaching rank 0 through a
// recording proxy; rank 2 comes when the test says, so rank 0's listener is open
// until then.
struct MeshUnderConstruction {
  MeshUnderConstruction() : store(std::make_shared<HashStore>(kTimeout)) {
    ranks[0] = std::thread([this] { make(0, store); });
    const std::vector<uint8_t> endpoint = store->get(tcp_channel_key(1, "addr/0"));
    std::string host;
    if (!tcp::parse_endpoint(std::string(endpoint.begin(), endpoint.end()), &host, &port0)) {
      throw std::runtime_error("rank 0 published no endpoint");
    }
    proxy = std::make_unique<RecordingProxy>(port0);
    auto via_proxy = redirect_key(store, "transport/addr/0", "127.0.0.1:" + std::to_string(proxy->port()));
    ranks[1] = std::thread([this, via_proxy] { make(1, via_proxy); });
  }
  ~MeshUnderConstruction() { finish(); }

  // What rank 1 sent rank 0 once its handshake and Hello are through.
  std::vector<uint8_t> rank1_hello() {
    const size_t want = net::kClientHelloBytes + detail::kHelloBytes;
    const auto deadline = Clock::now() + kTimeout;
    while (proxy->client_bytes(0).size() < want && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
    return proxy->client_bytes(0);
  }

  // Lets rank 2 come, and waits for every rank's set-up to end.
  void finish() {
    if (!rank2_started) ranks[2] = std::thread([this] { make(2, store); });
    rank2_started = true;
    for (auto& t : ranks) {
      if (t.joinable()) t.join();
    }
  }

  void make(int rank, std::shared_ptr<Store> s) {
    try {
      channels[rank] = DataChannel::create(
          "tcp", {.store = s, .rank = rank, .world_size = 3, .timeout = kTimeout, .token = std::string(kToken)});
    } catch (...) {
      errors[rank] = std::current_exception();
    }
  }

  std::shared_ptr<HashStore> store;
  uint16_t port0 = 0;
  std::unique_ptr<RecordingProxy> proxy;
  std::thread ranks[3];
  bool rank2_started = false;
  std::shared_ptr<DataChannel> channels[3];
  std::exception_ptr errors[3];
};

TEST(ListenerAuth, MeshListenerActsOnNothingUnproven) {
  MeshUnderConstruction mesh;
  const std::vector<uint8_t> recorded = mesh.rank1_hello();
  ASSERT_GE(recorded.size(), net::kClientHelloBytes + detail::kHelloBytes) << "rank 1 never got through to rank 0";
  // What an intruder wants rank 0 to take: rank 2's Hello (claiming the place
  // still free) and a message as from it.
  const detail::HelloBytes hello = detail::encode_hello({2, 3, {}});
  const std::vector<uint8_t> injected = {'I', 'N', 'J', 'E', 'C', 'T', 'E', 'D'};
  const detail::Envelope envelope{detail::p2p_context(0), 9,
                                  {detail::MessageOp::P2P, detail::kRawBytes, 0, -1, injected.size()}};
  const detail::FrameHeaderBytes header = detail::encode_frame_header(envelope, injected.size());
  std::vector<uint8_t> request(hello.begin(), hello.end());
  request.insert(request.end(), header.begin(), header.end());
  request.insert(request.end(), injected.begin(), injected.end());
  for (Attack attack : kAttacks) {
    // A replay repeats rank 1's own Hello after its handshake; what it adds is the message.
    const std::vector<uint8_t> sent =
        attack == Attack::Replay ? std::vector<uint8_t>(request.begin() + detail::kHelloBytes, request.end()) : request;
    const auto start = Clock::now();
    EXPECT_TRUE(refused(mesh.port0, attack, sent, recorded));
    report_timing("refusal of " + attack_name(attack), std::chrono::duration_cast<milliseconds>(Clock::now() - start));
  }
  const auto start = Clock::now();
  mesh.finish();
  report_timing("set-up after the attacks", std::chrono::duration_cast<milliseconds>(Clock::now() - start));
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_FALSE(mesh.errors[rank]) << "rank " << rank << ": " << describe(mesh.errors[rank]);
  }
  // The real ranks' messages are the ones rank 0 gets, and nothing else came.
  std::vector<std::thread> senders;
  for (int rank : {1, 2}) {
    senders.emplace_back([&, rank] {
      const std::vector<uint8_t> legit = {'R', 'A', 'N', 'K', ' ', ' ', ' ', static_cast<uint8_t>('0' + rank)};
      mesh.channels[rank]->send_bytes(legit, 0, {.tag = 9, .timeout = kTimeout});
    });
  }
  for (int rank : {1, 2}) {
    std::vector<uint8_t> got(8);
    mesh.channels[0]->recv_bytes(got, rank, {.tag = 9, .timeout = kTimeout});
    EXPECT_EQ(std::string(got.begin(), got.end()), "RANK   " + std::to_string(rank));
    std::vector<uint8_t> more(8);
    EXPECT_THROW(mesh.channels[0]->recv_bytes(more, rank, {.tag = 9, .timeout = 100ms}), TimeoutError)
        << "rank 0 got a second message as from rank " << rank;
  }
  for (auto& t : senders) t.join();
}

// The pool's bookkeeping an intruder would change: sessions drawn, and which holds
// the pool.
struct PoolBook {
  int64_t next_session = 0;
  bool active_set = false;
  std::string active;
};

PoolBook read_book(uint16_t port) {
  TCPStore s(client_of(port));
  PoolBook b;
  b.next_session = s.add("pool/next_session", 0);
  b.active_set = s.check({"pool/active"});
  if (b.active_set) b.active = s.get_string("pool/active");
  return b;
}

uint16_t port_of(const std::string& url) { return static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1))); }

TEST(ListenerAuth, PoolStoreActsOnNothingUnproven) {
  PoolUnderTest pool(1);
  const uint16_t port = port_of(pool.url());
  // A real master's session through a recording proxy in front of the pool's store:
  // its store connection draws a session id and claims the pool.
  std::vector<uint8_t> recorded;
  {
    RecordingProxy proxy(port);
    init_master_worker({.init_method = "tcp://127.0.0.1:" + std::to_string(proxy.port()),
                        .timeout = kTimeout,
                        .token = std::string(kToken)});
    EXPECT_FLOAT_EQ(DistributedTensor::ones({4}).sum().item<float>(), 4.0f);
    shutdown();
    ASSERT_GE(proxy.connections(), 1u);
    recorded = proxy.client_bytes(0);
  }
  // The workers release the pool once they finished the session.
  PoolBook before = read_book(port);
  for (auto deadline = Clock::now() + kTimeout; before.active_set && !before.active.empty() && Clock::now() < deadline;
       before = read_book(port)) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(!before.active_set || before.active.empty()) << "the pool was not released: " << before.active;
  // What an intruder asks: a session id, and the pool for it.
  wire::Request draw;
  draw.command = wire::Command::Add;
  draw.key = "pool/next_session";
  draw.delta = 1;
  wire::Request claim;
  claim.command = wire::Command::CompareSet;
  claim.key = "pool/active";
  const std::string session = "9223372036854775807";  // long enough that the requests outsize a ClientHello
  claim.value.assign(session.begin(), session.end());
  std::vector<uint8_t> request = wire::encode_request(draw);
  const std::vector<uint8_t> second = wire::encode_request(claim);
  request.insert(request.end(), second.begin(), second.end());
  for (Attack attack : kAttacks) {
    EXPECT_TRUE(refused(port, attack, request, recorded));
    const PoolBook after = read_book(port);
    EXPECT_EQ(after.next_session, before.next_session) << attack_name(attack) << ": a session id was drawn";
    EXPECT_TRUE(!after.active_set || after.active.empty()) << attack_name(attack) << ": the pool is held by "
                                                           << after.active;
  }
  // And the pool serves the next real master.
  init_master_worker({.init_method = pool.url(), .timeout = kTimeout, .token = std::string(kToken)});
  EXPECT_EQ(detail::live_tensors_per_node(), std::vector<uint64_t>(1, 0));
  EXPECT_FLOAT_EQ((DistributedTensor::ones({4}) * 2.0f).sum().item<float>(), 8.0f);
  shutdown();
}

}  // namespace
}  // namespace thd::test
