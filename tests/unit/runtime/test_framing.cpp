// MessageReceiver under short polls: a message that lands just as a poll times out
// must be delivered, never turned into a TimeoutError (which once stopped the
// master's reply thread).
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include <thd/datachannel.h>
#include <thd/store.h>

#include "datachannel/test_util.h"
#include "protocol/framing.h"

namespace thd {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(MessageReceiver, MessagesArrivingAsAPollTimesOutAreDelivered) {
  auto store = std::make_shared<HashStore>();
  std::shared_ptr<DataChannel> ch[2];
  auto errors = test::run_rank_threads(2, [&](int rank) {
    ch[rank] = DataChannel::create("tcp", {.store = store, .rank = rank, .world_size = 2, .timeout = seconds(10),
                                           .token = test::kToken});
  });
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
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
  protocol::Received m;
  int got = 0;
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (got < kMessages && std::chrono::steady_clock::now() < deadline) {
    if (!receiver.next(m, milliseconds(1), seconds(10))) continue;  // throws on the bug
    ASSERT_EQ(m.bytes.size(), 8u);
    ASSERT_EQ(m.bytes[0] | m.bytes[1] << 8, got) << "messages out of order";
    ++got;
  }
  sender.join();
  EXPECT_EQ(got, kMessages);
  ch[0]->shutdown();
  ch[1]->shutdown();
}

}  // namespace
}  // namespace thd
