// The protocol's framing over a tcp channel: MessageReceiver under short polls (a
// message that lands just as a poll times out is delivered, never turned into an
// error), and PostedMessage's messages of any length up to its limit.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include <thd/datachannel.h>
#include <thd/store.h>

#include "datachannel/test_util.h"
#include "protocol/codec.h"
#include "protocol/framing.h"

namespace thd {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Ranks 0 and 1 of a tcp channel in this process.
std::array<std::shared_ptr<DataChannel>, 2> two_tcp_ranks() {
  auto store = std::make_shared<HashStore>();
  std::array<std::shared_ptr<DataChannel>, 2> ch;
  auto errors = test::run_rank_threads(2, [&](int rank) {
    ch[rank] = DataChannel::create("tcp", {.store = store, .rank = rank, .world_size = 2, .timeout = seconds(10),
                                           .token = test::kToken});
  });
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return ch;
}

TEST(MessageReceiver, MessagesArrivingAsAPollTimesOutAreDelivered) {
  std::array<std::shared_ptr<DataChannel>, 2> ch = two_tcp_ranks();
  // Sends spaced about one poll apart, so arrivals keep landing at poll timeouts.
  constexpr int kMessages = 2500;
  std::thread sender([&] {
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> gap(900, 1100);
    for (int i = 0; i < kMessages; ++i) {
      std::this_thread::sleep_for(microseconds(gap(rng)));
      const uint8_t msg[8] = {static_cast<uint8_t>(i), static_cast<uint8_t>(i >> 8)};
      protocol::send_message(*ch[1], 0, 7, {msg, sizeof msg}, seconds(10));
    }
  });
  protocol::MessageReceiver receiver(ch[0], 1, 7, 1 << 20);
  Message m;
  int got = 0;
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (got < kMessages && std::chrono::steady_clock::now() < deadline) {
    if (!receiver.next(m, milliseconds(1))) continue;  // throws on the bug
    ASSERT_EQ(m.size(), 8u);
    ASSERT_EQ(m.source(), 1);
    ASSERT_EQ(m.data()[0] | m.data()[1] << 8, got) << "messages out of order";
    ++got;
  }
  sender.join();
  EXPECT_EQ(got, kMessages);
  ch[0]->shutdown();
  ch[1]->shutdown();
}

// PostedMessage: the receive posted first (its owner may watch something else
// meanwhile); the message is one of its own length, whatever that is, up to the
// limit given when it was posted.
TEST(PostedMessage, TakesOneMessageOfAnyLengthUpToItsLimit) {
  std::array<std::shared_ptr<DataChannel>, 2> ch = two_tcp_ranks();
  auto receive = [&](int64_t tag, size_t max_bytes) {
    protocol::PostedMessage posted(*ch[0], 1, tag, seconds(10), max_bytes);
    const Message m = posted.wait_message();
    return std::vector<uint8_t>(m.data(), m.data() + m.size());
  };
  const std::vector<uint8_t> small = {1, 2, 3};
  protocol::send_message(*ch[1], 0, 3, small, seconds(10));
  EXPECT_EQ(receive(3, 1 << 20), small);
  std::vector<uint8_t> large(300000);
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<uint8_t>(i * 7);
  protocol::send_message(*ch[1], 0, 4, large, seconds(10));
  EXPECT_EQ(receive(4, 1 << 20), large);
  protocol::send_message(*ch[1], 0, 4, {}, seconds(10));
  EXPECT_TRUE(receive(4, 1 << 20).empty());
  // Over the receiver's limit: a ProtocolError naming both lengths, not the channel's ValueError.
  protocol::send_message(*ch[1], 0, 5, large, seconds(10));
  try {
    (void)receive(5, 1000);
    ADD_FAILURE() << "a message over the limit was received";
  } catch (const protocol::ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("300000 bytes"), std::string::npos) << e.what();
  }
  // A tensor's message where a protocol message belongs: a ProtocolError too.
  ch[1]->send(Tensor::ones({4}, kFloat32), 0, {.tag = 6});
  EXPECT_THROW(receive(6, 1 << 20), protocol::ProtocolError);
  // Both were discarded: the tags are in step.
  protocol::send_message(*ch[1], 0, 5, small, seconds(10));
  EXPECT_EQ(receive(5, 1000), small);
  ch[0]->shutdown();
  ch[1]->shutdown();
}

}  // namespace
}  // namespace thd
