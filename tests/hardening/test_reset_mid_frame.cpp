// A connection reset in the middle of a frame (the peer's host crashed, a middlebox
// dropped the flow: a TCP RST after half a frame) is a lost peer — thd::PeerLost
// naming it, within 2 s — never a hang, a crash, or a half-filled buffer passed off
// as a message. The broken peer is played by hand on a raw socket: a fake rank of a
// real tcp DataChannel, a fake store server, a store client.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include <thd/datachannel.h>
#include <thd/store.h>

#include "datachannel/envelope.h"
#include "datachannel/net/auth.h"
#include "datachannel/store/tcp_store_wire.h"
#include "datachannel/wire.h"
#include "fault_checks.h"
#include "raw_peer.h"
#include "test_util.h"

namespace thd::test {
namespace {

using namespace std::chrono_literals;
namespace wire = detail::store_wire;

constexpr milliseconds kOpTimeout{10000};
constexpr size_t kPayload = 1000;

// Rank 0 of a tcp DataChannel of two ranks, real, in this process; rank 1 is a raw
// socket the test writes frames on.
struct HalfFakeChannel {
  HalfFakeChannel() {
    auto store = std::make_shared<HashStore>(kOpTimeout);
    std::exception_ptr error;
    std::thread real([&] {
      try {
        channel = DataChannel::create(
            "tcp", {.store = store, .rank = 0, .world_size = 2, .timeout = kOpTimeout, .token = std::string(kToken)});
      } catch (...) {
        error = std::current_exception();
      }
    });
    try {
      fake = join_mesh_as_top_rank(*store, 2, 0, kToken);
    } catch (...) {
      real.join();
      throw;
    }
    real.join();
    if (error) std::rethrow_exception(error);
  }
  std::shared_ptr<DataChannel> channel;
  net::Socket fake;
};

std::vector<uint8_t> message_header(int64_t tag, size_t payload) {
  const detail::Envelope envelope{detail::p2p_context(0), tag,
                                  {detail::MessageOp::P2P, detail::kRawBytes, 0, -1, payload}};
  const detail::FrameHeaderBytes h = detail::encode_frame_header(envelope, payload);
  return {h.begin(), h.end()};
}

// `call` throws PeerLost naming rank 1 within the bound.
::testing::AssertionResult peer_lost(const std::function<void()>& call, Clock::time_point since,
                                     const std::string& what) {
  try {
    call();
    return ::testing::AssertionFailure() << what << ": did not throw";
  } catch (const PeerLost& e) {
    const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - since);
    report_timing(what, took);
    if (took > kNoticeWithin) return ::testing::AssertionFailure() << what << ": PeerLost after " << took.count() << " ms";
    const std::string text = e.what();
    if (e.context().peer != 1 && text.find("rank 1") == std::string::npos) {
      return ::testing::AssertionFailure() << what << ": the PeerLost does not name rank 1: " << text;
    }
    return ::testing::AssertionSuccess();
  } catch (...) {
    return ::testing::AssertionFailure() << what << ": threw " << describe(std::current_exception());
  }
}

enum class Cut { InHeader, InPayload };
void PrintTo(Cut c, std::ostream* os) { *os << (c == Cut::InHeader ? "InHeader" : "InPayload"); }

class ResetMidFrame : public ::testing::TestWithParam<std::tuple<Cut, bool>> {};

TEST_P(ResetMidFrame, DataChannelPeer) {
  const auto [cut, posted_first] = GetParam();
  HalfFakeChannel dc;
  std::vector<uint8_t> buffer(kPayload, 0xAA);
  Request pending;
  if (posted_first) pending = dc.channel->irecv_bytes(buffer, 1, {.tag = 5, .timeout = kOpTimeout});
  std::vector<uint8_t> frame = message_header(5, kPayload);
  if (cut == Cut::InHeader) {
    frame.resize(detail::kFrameHeaderBytes / 2);
  } else {
    frame.insert(frame.end(), kPayload / 2, 0x55);
  }
  ASSERT_TRUE(send_raw(dc.fake, frame));
  std::this_thread::sleep_for(20ms);  // the half frame is read before the reset arrives
  reset_connection(dc.fake);
  const auto cut_at = Clock::now();
  if (!posted_first) pending = dc.channel->irecv_bytes(buffer, 1, {.tag = 5, .timeout = kOpTimeout});
  // The half message is not passed off as a message: the receive fails.
  EXPECT_TRUE(peer_lost([&] { pending.wait(); }, cut_at, "the receive of the cut message"));
  // And the peer stays lost.
  const std::vector<uint8_t> more(8, 1);
  EXPECT_TRUE(peer_lost([&] { dc.channel->send_bytes(more, 1, {.tag = 6, .timeout = kOpTimeout}); }, cut_at,
                        "a send after the reset"));
}

INSTANTIATE_TEST_SUITE_P(Cuts, ResetMidFrame,
                         ::testing::Combine(::testing::Values(Cut::InHeader, Cut::InPayload), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == Cut::InHeader ? "InHeader" : "InPayload") +
                                  (std::get<1>(info.param) ? "ReceivePosted" : "ReceiveLater");
                         });

TEST(ResetMidFrameStore, ServerDropsOnlyTheBrokenClient) {
  TCPStore server({.port = 0, .is_server = true, .timeout = kOpTimeout, .token = std::string(kToken)});
  server.set("before", "1");
  const int64_t keys = server.num_keys();
  net::Socket raw = connect_raw(server.port());
  net::client_handshake(raw, net::AuthToken(kToken, "the test"), net::deadline_after(kOpTimeout), "test");
  wire::Request set;
  set.command = wire::Command::Set;
  set.key = "cut";
  set.value = wire::Bytes(100, 7);
  wire::Bytes frame = wire::encode_request(set);
  frame.resize(frame.size() / 2);
  ASSERT_TRUE(send_raw(raw, frame));
  std::this_thread::sleep_for(20ms);
  reset_connection(raw);
  // The server lives on, and the half request did nothing.
  const auto cut_at = Clock::now();
  TCPStore client({.port = server.port(), .timeout = kOpTimeout, .token = std::string(kToken)});
  EXPECT_EQ(client.get_string("before"), "1");
  EXPECT_FALSE(client.check({"cut"}));
  EXPECT_EQ(client.num_keys(), keys);
  EXPECT_LT(Clock::now() - cut_at, kNoticeWithin);
}

TEST(ResetMidFrameStore, ClientOfAServerCutMidReplyGetsPeerLost) {
  net::Socket listener = net::Socket::listen("127.0.0.1", 0, "test");
  const uint16_t port = listener.local_port();
  std::atomic<Clock::rep> cut_at{0};  // when the fake server reset the connection
  std::thread fake_server([&] {
    const net::Deadline deadline = net::deadline_after(kOpTimeout);
    net::Socket s;
    while (!s.valid() && net::Clock::now() < deadline) {
      s = listener.accept();
      if (!s.valid()) std::this_thread::sleep_for(1ms);
    }
    if (!s.valid()) return;
    try {
      net::server_handshake(s, net::AuthToken(kToken, "the test"), deadline, "test");
    } catch (const Error&) {
      return;
    }
    recv_up_to(s, 5, 2000ms);  // the client's Join: length[4] command[1]
    const std::vector<uint8_t> half_reply = {1, 0};  // half of a length prefix
    send_raw(s, half_reply);
    std::this_thread::sleep_for(20ms);
    cut_at.store(Clock::now().time_since_epoch().count());
    reset_connection(s);
  });
  try {
    TCPStore client({.port = port, .timeout = kOpTimeout, .token = std::string(kToken)});
    ADD_FAILURE() << "a store client whose server broke off mid-reply came up";
  } catch (const PeerLost& e) {
    const Clock::time_point cut{Clock::duration(cut_at.load())};
    const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - cut);
    report_timing("store client", took);
    EXPECT_LT(took, kNoticeWithin);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos) << e.what();
  } catch (...) {
    ADD_FAILURE() << "expected PeerLost, got " << describe(std::current_exception());
  }
  fake_server.join();
}

}  // namespace
}  // namespace thd::test
