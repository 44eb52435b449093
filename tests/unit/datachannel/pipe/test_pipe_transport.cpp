// PipeTransport over an in-memory pipe: matching, inline and announced payloads,
// checks before bytes land, bytes no thd rank would send, lost peers, cancel.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "datachannel/pipe/pipe_transport.h"
#include "datachannel/pipe/small_message_header.h"
#include "datachannel/spin_policy.h"
#include "datachannel/wire.h"
#include "datachannel/transport_test_util.h"
#include "memory_pipe.h"
#include "scoped_env.h"
#include "stand_in_process.h"

namespace thd::test {
namespace {

using detail::pipe::PipeTransport;
using detail::pipe::PipeTuning;

// The token every rank of a World holds unless a test says otherwise.
detail::pipe::PipeAuth auth_for(const std::shared_ptr<Store>& store, const std::string& token = std::string(kToken)) {
  return {net::AuthToken(token, "test"), store, std::chrono::milliseconds(5000)};
}

// n ranks over one fabric, made at once (each waits for the others' token proofs).
struct World {
  // `heartbeats`: the pipes cannot tell a silent peer, so the transports send
  // heartbeats and declare a peer silent for tuning.heartbeat_timeout lost.
  // `native`: the pipes match the point-to-point envelopes that fit their tag.
  explicit World(int n, PipeTuning tuning = {}, bool heartbeats = false, bool native = false)
      : fabric(n, /*detects_silent_loss=*/!heartbeats, native), ranks(static_cast<size_t>(n)) {
    auto store = std::make_shared<HashStore>(std::chrono::milliseconds(5000));
    std::vector<std::thread> makers;
    for (int r = 0; r < n; ++r) {
      makers.emplace_back([&, r] {
        ranks[static_cast<size_t>(r)] = std::make_unique<PipeTransport>(fabric.make_pipe(r), auth_for(store), tuning);
      });
    }
    for (auto& t : makers) t.join();
  }
  PipeTransport& operator[](int r) { return *ranks[static_cast<size_t>(r)]; }
  MemoryFabric fabric;
  std::vector<std::unique_ptr<PipeTransport>> ranks;
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

std::string error_text(const std::exception_ptr& e) { return what(e); }

TEST(PipeTransport, InlineAndAnnouncedPayloadsArriveIntactPostedFirstOrUnexpected) {
  World w(2);
  const size_t inline_max = PipeTuning{}.inline_bytes;
  int64_t tag = 0;
  for (size_t n : {size_t{0}, size_t{5}, inline_max, inline_max + 1, size_t{1} << 20}) {
    for (bool recv_first : {true, false}) {
      ++tag;
      const auto data = pattern(n, static_cast<uint8_t>(tag));
      std::vector<uint8_t> got(n, 0xee);
      RequestPtr r;
      if (recv_first) r = irecv(w[1], got, 0, tag);
      auto s = isend(w[0], data, 1, tag);
      if (!recv_first) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the message is unexpected by now
        r = irecv(w[1], got, 0, tag);
      }
      ASSERT_EQ(wait_error(w[1], *r), nullptr) << n << " bytes";
      ASSERT_EQ(wait_error(w[0], *s), nullptr) << n << " bytes";
      EXPECT_EQ(got, data) << n << " bytes, recv first " << recv_first;
      EXPECT_EQ(r->source, 0);
      EXPECT_EQ(r->bytes, n);
    }
  }
}

TEST(PipeTransport, ContextsTagsAndAnySourceMatchInOrder) {
  World w(3);
  const auto a = pattern(16, 1);
  const auto b = pattern(16, 2);
  const auto c = pattern(16, 3);
  // Same tag, other context: must not match the context-0 receive.
  isend(w[1], a, 0, raw_envelope(5, 16, /*context=*/2));
  isend(w[1], b, 0, raw_envelope(5, 16, /*context=*/0));
  isend(w[2], c, 0, raw_envelope(5, 16, /*context=*/0));
  std::vector<uint8_t> got0(16), got1(16), got2(16);
  auto r0 = irecv(w[0], got0, 1, raw_envelope(5, 16, 0));
  auto r1 = irecv(w[0], got1, kAnySource, raw_envelope(5, 16, 0));
  auto r2 = irecv(w[0], got2, 1, raw_envelope(5, 16, 2));
  ASSERT_EQ(wait_error(w[0], *r0), nullptr);
  ASSERT_EQ(wait_error(w[0], *r1), nullptr);
  ASSERT_EQ(wait_error(w[0], *r2), nullptr);
  EXPECT_EQ(got0, b);
  EXPECT_EQ(got1, c);
  EXPECT_EQ(r1->source, 2);
  EXPECT_EQ(got2, a);
}

TEST(PipeTransport, MismatchFailsTheReceiveAndDiscardsAnAnnouncedPayload) {
  World w(2);
  const auto big = pattern(20000, 9);
  isend(w[0], big, 1, 1);
  std::vector<uint8_t> small(100, 0xee);
  auto r = irecv(w[1], small, 0, 1);
  const auto e = wait_error(w[1], *r);
  ASSERT_NE(e, nullptr);
  // The transport's own check, naming both messages, before the payload is received.
  EXPECT_NE(error_text(e).find("20000 bytes"), std::string::npos) << error_text(e);
  EXPECT_NE(error_text(e).find("100 bytes"), std::string::npos) << error_text(e);
  EXPECT_EQ(small, std::vector<uint8_t>(100, 0xee)) << "a refused message wrote into the receive";
  // The stream goes on: the next message on the tag arrives whole.
  const auto next = pattern(30000, 4);
  isend(w[0], next, 1, 1);
  std::vector<uint8_t> got(30000);
  auto r2 = irecv(w[1], got, 0, 1);
  ASSERT_EQ(wait_error(w[1], *r2), nullptr);
  EXPECT_EQ(got, next);
}

TEST(PipeTransport, BytesThatAreNotAThdMessageDropOnlyThatPeer) {
  World w(3);
  std::vector<uint8_t> got(8);
  auto from1 = irecv(w[0], got, 1, 1);
  w.fabric.inject(1, 0, detail::pipe::kControlTag, {'n', 'o', 't', ' ', 't', 'h', 'd'});
  const auto e = wait_error(w[0], *from1);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(error_text(e).find("not a thd message"), std::string::npos) << error_text(e);
  EXPECT_NE(w[0].peer_error(1), nullptr);
  EXPECT_EQ(w[0].peer_error(2), nullptr);
  // Later operations with rank 1 fail at once; rank 2 still talks.
  auto again = irecv(w[0], got, 1, 2);
  EXPECT_NE(wait_error(w[0], *again), nullptr);
  const auto data = pattern(8, 5);
  isend(w[2], data, 0, 3);
  auto from2 = irecv(w[0], got, 2, 3);
  ASSERT_EQ(wait_error(w[0], *from2), nullptr);
  EXPECT_EQ(got, data);
}

// What rank `from` last sent on the control tag, in bytes.
size_t last_control_send(World& w, int from) {
  const auto calls = w.fabric.pipe(from).calls();
  for (auto c = calls.rbegin(); c != calls.rend(); ++c) {
    if (c->send && c->tag == detail::pipe::kControlTag) return c->bytes;
  }
  return 0;
}

TEST(PipeTransport, SmallPointToPointMessagesTravelWithTheSmallHeader) {
  World w(2);
  const auto data = pattern(8, 3);
  const size_t small = detail::kSmallHeaderBytes + data.size();
  const size_t full = detail::kFrameHeaderBytes + data.size();
  Envelope tensor = raw_envelope(7, 2, /*context=*/4);
  tensor.kind.dtype = static_cast<uint8_t>(kFloat32);
  Envelope collective = raw_envelope(int64_t{5} << 32 | 9, 8, /*context=*/5);
  collective.kind.op = detail::MessageOp::AllReduce;
  collective.kind.reduce = 1;
  collective.kind.root = 0;
  struct Case {
    Envelope envelope;
    size_t expected;
  };
  for (const Case& c : {Case{raw_envelope(1, 8), small}, Case{tensor, small}, Case{collective, full}}) {
    for (bool recv_first : {true, false}) {  // matched where the pipe reports it, or unexpected
      std::vector<uint8_t> got(data.size(), 0xee);
      RequestPtr r;
      if (recv_first) r = irecv(w[1], got, 0, c.envelope);
      auto s = isend(w[0], data, 1, c.envelope);
      ASSERT_EQ(wait_error(w[0], *s), nullptr);
      EXPECT_EQ(last_control_send(w, 0), c.expected) << "op " << int(c.envelope.kind.op);
      if (!recv_first) r = irecv(w[1], got, 0, c.envelope);
      ASSERT_EQ(wait_error(w[1], *r), nullptr);
      EXPECT_EQ(got, data);
      EXPECT_EQ(r->bytes, data.size());
    }
  }
  // The small header carries the kind: a receive of another dtype is refused
  // before a byte lands.
  Envelope ints = tensor;
  ints.kind.dtype = static_cast<uint8_t>(kInt32);
  isend(w[0], data, 1, tensor);
  std::vector<uint8_t> got(data.size(), 0xee);
  auto r = irecv(w[1], got, 0, ints);
  const auto e = wait_error(w[1], *r);
  ASSERT_NE(e, nullptr);
  EXPECT_THROW(std::rethrow_exception(e), TypeError);
  EXPECT_NE(error_text(e).find("float32"), std::string::npos) << error_text(e);
  EXPECT_NE(error_text(e).find("int32"), std::string::npos) << error_text(e);
  EXPECT_EQ(got, std::vector<uint8_t>(data.size(), 0xee));
}

TEST(PipeTransport, MalformedSmallHeaderDropsThePeerSayingWhy) {
  const uint8_t m = detail::kSmallMessageMarker;
  struct Case {
    std::vector<uint8_t> bytes;
    std::string why;
  };
  std::vector<uint8_t> negative(detail::kSmallHeaderBytes + 4, 0);
  negative[0] = m;
  negative[15] = 0x80;  // the tag's top byte: negative
  for (const Case& c : {Case{{m, 1, 2, 3, 4, 5, 6, 7, 8, 9}, "10-byte small message"},
                        Case{negative, "negative tag"}}) {
    World w(2);
    std::vector<uint8_t> got(4);
    auto r = irecv(w[1], got, 0, 1);
    w.fabric.inject(0, 1, detail::pipe::kControlTag, c.bytes);
    const auto e = wait_error(w[1], *r);
    ASSERT_NE(e, nullptr);
    EXPECT_NE(error_text(e).find(c.why), std::string::npos) << error_text(e);
    EXPECT_NE(w[1].peer_error(0), nullptr);
  }
}

TEST(PipeTransport, AnnouncementOfATagThePipeCannotCarryDropsThePeer) {
  World w(2);
  const auto header = detail::encode_frame_header(raw_envelope(1, 100000), 100000,
                                                       detail::FrameKind::ReadyToSend, uint64_t{1} << 40);
  std::vector<uint8_t> got(100000);
  auto r = irecv(w[1], got, 0, 1);
  w.fabric.inject(0, 1, detail::pipe::kControlTag, std::vector<uint8_t>(header.begin(), header.end()));
  const auto e = wait_error(w[1], *r);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(error_text(e).find("data tag"), std::string::npos) << error_text(e);
}

TEST(PipeTransport, CancelledReceiveWaitingForItsPayloadIsNeverWritten) {
  World w(2);
  // An announcement whose payload has not come yet: the receive is matched and its
  // payload receive posted in the pipe.
  const auto header =
      detail::encode_frame_header(raw_envelope(1, 50000), 50000, detail::FrameKind::ReadyToSend, 7);
  std::vector<uint8_t> got(50000, 0xee);
  auto r = irecv(w[1], got, 0, 1);
  w.fabric.inject(0, 1, detail::pipe::kControlTag, std::vector<uint8_t>(header.begin(), header.end()));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_FALSE(r->finished());
  w[1].cancel(r, std::make_exception_ptr(Error("withdrawn by the test")));
  ASSERT_TRUE(r->finished());
  EXPECT_NE(error_text(r->error).find("withdrawn by the test"), std::string::npos);
  w.fabric.inject(0, 1, 7, pattern(50000, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(got, std::vector<uint8_t>(50000, 0xee)) << "a cancelled receive was written";
}

TEST(PipeTransport, UnmatchedReceiveIsWithdrawnAndTheMessageGoesToTheNextOne) {
  World w(2);
  std::vector<uint8_t> first(4), second(4);
  auto r1 = irecv(w[1], first, 0, 1);
  w[1].cancel(r1, std::make_exception_ptr(Error("cancelled")));
  EXPECT_EQ(r1->status(), RequestState::Failed);
  const auto data = pattern(4, 3);
  isend(w[0], data, 1, 1);
  auto r2 = irecv(w[1], second, 0, 1);
  ASSERT_EQ(wait_error(w[1], *r2), nullptr);
  EXPECT_EQ(second, data);
}

// A RequestMaker for send_blocking that counts the requests it made.
struct CountingMaker {
  explicit CountingMaker(Transport& t) : transport(&t) {}
  detail::RequestMaker maker() const {
    return {[](const void* p) {
              auto& self = *static_cast<CountingMaker*>(const_cast<void*>(p));
              ++self.made;
              return new_request(*self.transport, "blocking send");
            },
            this};
  }
  Transport* transport;
  int made = 0;
};

TEST(PipeTransport, ABlockingSendThePipeFinishesAtOnceMakesNoRequest) {
  World w(2);
  w.fabric.pipe(0).finish_sends_at_once(true);
  CountingMaker make(w[0]);
  for (int i = 0; i < 3; ++i) {
    const auto data = pattern(16, static_cast<uint8_t>(i));
    EXPECT_EQ(w[0].send_blocking(data, 1, raw_envelope(5, data.size()), make.maker()), nullptr);
    std::vector<uint8_t> got(16);
    auto r = irecv(w[1], got, 0, 5);
    ASSERT_TRUE(wait_ok(w[1], *r));
    EXPECT_EQ(got, data);
  }
  EXPECT_EQ(make.made, 0);
}

TEST(PipeTransport, ABlockingSendStillInFlightIsWaitedForThroughItsRequest) {
  World w(2);  // the memory pipe reports sends at its next progress()
  CountingMaker make(w[0]);
  const auto data = pattern(32, 9);
  auto request = w[0].send_blocking(data, 1, raw_envelope(6, data.size()), make.maker());
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(make.made, 1);
  EXPECT_TRUE(wait_ok(w[0], *request));
  std::vector<uint8_t> got(32);
  auto r = irecv(w[1], got, 0, 6);
  ASSERT_TRUE(wait_ok(w[1], *r));
  EXPECT_EQ(got, data);
}

TEST(PipeTransport, ABlockingSendOfAnAnnouncedPayloadTakesARequest) {
  PipeTuning tuning;
  tuning.inline_bytes = 64;
  World w(2, tuning);
  w.fabric.pipe(0).finish_sends_at_once(true);
  CountingMaker make(w[0]);
  const auto data = pattern(1000, 4);
  std::vector<uint8_t> got(1000);
  auto r = irecv(w[1], got, 0, 2);
  auto request = w[0].send_blocking(data, 1, raw_envelope(2, data.size()), make.maker());
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(make.made, 1);
  EXPECT_TRUE(wait_ok(w[0], *request));
  ASSERT_TRUE(wait_ok(w[1], *r));
  EXPECT_EQ(got, data);
}

TEST(PipeTransport, ABlockingSendThePipeFailsAtOnceFailsItsRequestWithPeerLost) {
  World w(3);
  w.fabric.pipe(0).finish_sends_at_once(true);
  CountingMaker make(w[0]);
  w.fabric.lose(1);
  const auto data = pattern(8, 1);
  auto request = w[0].send_blocking(data, 1, raw_envelope(0, data.size()), make.maker());
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(make.made, 1);
  const auto e = wait_error(w[0], *request);
  EXPECT_TRUE(holds<PeerLost>(e)) << what(e);
  // The others are unaffected.
  EXPECT_EQ(w[0].send_blocking(data, 2, raw_envelope(0, data.size()), make.maker()), nullptr);
  std::vector<uint8_t> got(8);
  auto r = irecv(w[2], got, 0, 0);
  ASSERT_TRUE(wait_ok(w[2], *r));
}

// What DataChannel::recv_bytes hands recv_blocking: a receive due in `timeout`.
detail::RequestSpec blocking_recv_spec(int src, int64_t tag, std::chrono::milliseconds timeout = kLong) {
  return {detail::OpLabel::recv_from(src, tag), net::deadline_after(timeout), 1, false, {}, nullptr};
}

TEST(PipeTransport, ABlockingReceiveTakesItsMessageUnexpectedOrArrivingWhileItWaits) {
  World w(3);
  // Unexpected: the message is there before the receive.
  const auto early = pattern(24, 1);
  isend(w[0], early, 1, 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::vector<uint8_t> got(24);
  EXPECT_EQ(w[1].recv_blocking(got, 0, raw_envelope(4, 24), blocking_recv_spec(0, 4)), 0);
  EXPECT_EQ(got, early);
  // Arriving while the receiver waits, from any source: the answer names the sender.
  const auto late = pattern(24, 2);
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    isend(w[2], late, 1, 4);
  });
  EXPECT_EQ(w[1].recv_blocking(got, kAnySource, raw_envelope(4, 24), blocking_recv_spec(-1, 4)), 2);
  sender.join();
  EXPECT_EQ(got, late);
  // An announced payload, received into the caller's memory.
  const auto big = pattern(50000, 3);
  isend(w[0], big, 1, 5);
  std::vector<uint8_t> got_big(big.size());
  EXPECT_EQ(w[1].recv_blocking(got_big, 0, raw_envelope(5, big.size()), blocking_recv_spec(0, 5)), 0);
  EXPECT_EQ(got_big, big);
}

TEST(PipeTransport, ABlockingReceivePastItsDeadlineIsWithdrawnAndTheMessageGoesToTheNextOne) {
  World w(2);
  std::vector<uint8_t> first(8, 0xee), second(8);
  try {
    w[1].recv_blocking(first, 0, raw_envelope(3, 8), blocking_recv_spec(0, 3, std::chrono::milliseconds(50)));
    FAIL() << "a receive nobody sends to returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("recv from rank 0 (tag 3)"), std::string::npos) << e.what();
  }
  const auto data = pattern(8, 4);
  isend(w[0], data, 1, 3);
  EXPECT_EQ(w[1].recv_blocking(second, 0, raw_envelope(3, 8), blocking_recv_spec(0, 3)), 0);
  EXPECT_EQ(second, data);
  EXPECT_EQ(first, std::vector<uint8_t>(8, 0xee)) << "a withdrawn receive was written";
}

TEST(PipeTransport, ABlockingReceiveThrowsTheMismatchOrThePeerLoss) {
  World w(3);
  isend(w[0], pattern(16, 5), 1, 6);
  std::vector<uint8_t> small(8, 0xee);
  try {
    w[1].recv_blocking(small, 0, raw_envelope(6, 8), blocking_recv_spec(0, 6));
    FAIL() << "a 16-byte message was taken by an 8-byte receive";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("16 bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(small, std::vector<uint8_t>(8, 0xee));
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    w.fabric.lose(2);
  });
  EXPECT_THROW(w[1].recv_blocking(small, 2, raw_envelope(7, 8), blocking_recv_spec(2, 7)), PeerLost);
  killer.join();
}

TEST(PipeTransport, LostPeerFailsPendingAndLaterOperationsWithPeerLost) {
  World w(3);
  std::vector<uint8_t> got(4);
  auto pending = irecv(w[0], got, 1, 1);
  w.fabric.lose(1);
  const auto e = wait_error(w[0], *pending);
  ASSERT_NE(e, nullptr);
  EXPECT_THROW(std::rethrow_exception(e), PeerLost);
  auto later = isend(w[0], pattern(4, 1), 1, 2);
  EXPECT_NE(wait_error(w[0], *later), nullptr);
}

TEST(PipeTransport, APeerPastTheUnexpectedLimitIsCutOffAndTheOthersCarryOn) {
  // The pipes cannot hold a sender back: a peer whose messages nobody receives
  // would grow this rank's memory without end. Past the limit it is cut off.
  PipeTuning tuning;
  tuning.unexpected_limit = 64 << 10;
  World w(3, tuning);
  const size_t n = 6000;  // inline: the payloads are held here
  std::vector<RequestPtr> sends;
  for (int i = 0; i < 20; ++i) sends.push_back(isend(w[1], pattern(n, static_cast<uint8_t>(i)), 0, 7));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (w[0].peer_error(1) == nullptr && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const std::exception_ptr cut = w[0].peer_error(1);
  ASSERT_NE(cut, nullptr) << "20 x 6000 bytes nobody received did not cut rank 1 off at 64 KiB";
  EXPECT_THROW(std::rethrow_exception(cut), PeerLost);
  EXPECT_NE(error_text(cut).find("cut off"), std::string::npos) << error_text(cut);
  EXPECT_NE(error_text(cut).find("THD_MAX_UNEXPECTED_BYTES"), std::string::npos) << error_text(cut);
  // What was held before the limit stays receivable, in order.
  std::vector<uint8_t> got(n);
  ASSERT_EQ(wait_error(w[0], *irecv(w[0], got, 1, 7)), nullptr);
  EXPECT_EQ(got, pattern(n, 0));
  // Rank 2 is not concerned.
  std::vector<uint8_t> hi(2);
  auto r = irecv(w[0], hi, 2, 8);
  ASSERT_EQ(wait_error(w[2], *isend(w[2], pattern(2, 5), 0, 8)), nullptr);
  ASSERT_EQ(wait_error(w[0], *r), nullptr);
  EXPECT_EQ(hi, pattern(2, 5));
}

// Two transports over `fabric`, rank 1 published as `rank1_process`: the process
// watch of rank 0 follows that process.
std::vector<std::unique_ptr<PipeTransport>> pair_with_rank1_as(MemoryFabric& fabric, StandInProcess& rank1_process) {
  auto store = std::make_shared<HashStore>(std::chrono::milliseconds(5000));
  std::vector<std::unique_ptr<PipeTransport>> t(2);
  std::vector<std::thread> makers;
  for (int r = 0; r < 2; ++r) {
    makers.emplace_back([&, r] {
      detail::pipe::PipeAuth auth = auth_for(store);
      if (r == 1) auth.identity = rank1_process.identity();
      t[static_cast<size_t>(r)] = std::make_unique<PipeTransport>(fabric.make_pipe(r), std::move(auth));
    });
  }
  for (auto& m : makers) m.join();
  return t;
}

TEST(PipeTransport, APeerWhoseProcessOnThisHostExitsIsLostWithinASecond) {
  // Rank 1 publishes a child process as its own; the pipes cannot tell a silent
  // peer and send no heartbeats, so only the process watch can notice the child's
  // death, which it must well before any heartbeat timeout would.
  StandInProcess rank1_process;
  MemoryFabric fabric(2, /*detects_silent_loss=*/true);
  auto t = pair_with_rank1_as(fabric, rank1_process);
  std::vector<uint8_t> got(8);
  auto first = irecv(*t[0], got, 1, 1);
  auto s = isend(*t[1], pattern(8, 1), 0, 1);
  ASSERT_TRUE(wait_ok(*t[0], *first));
  ASSERT_TRUE(wait_ok(*t[1], *s));
  auto pending = irecv(*t[0], got, 1, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(pending->finished()) << "a live peer was counted lost";
  const auto killed = std::chrono::steady_clock::now();
  rank1_process.kill();
  const auto e = wait_error(*t[0], *pending);
  const auto took = std::chrono::steady_clock::now() - killed;
  std::string message;
  ASSERT_TRUE(holds<PeerLost>(e, &message)) << what(e);
  EXPECT_NE(message.find(fmt::format("pid {} on this host) exited", rank1_process.pid())), std::string::npos)
      << message;
  EXPECT_LT(took, std::chrono::seconds(1));
  // Rank 1's view of rank 0 (this process, alive) is untouched.
  EXPECT_EQ(t[1]->peer_error(0), nullptr);
}

// Heartbeats that make a silent peer lost after 400 ms, sent every 100 ms.
PipeTuning short_heartbeats() {
  PipeTuning tuning;
  tuning.heartbeat_timeout = std::chrono::milliseconds(400);
  tuning.heartbeat_interval = std::chrono::milliseconds(100);
  return tuning;
}

// Every pair of ranks of `w` still exchanges a message: nobody counts anybody lost.
void expect_every_pair_alive(World& w) {
  const int n = static_cast<int>(w.ranks.size());
  for (int from = 0; from < n; ++from) {
    for (int to = 0; to < n; ++to) {
      if (from == to) continue;
      SCOPED_TRACE(fmt::format("rank {} to rank {}", from, to));
      std::vector<uint8_t> got(8);
      auto r = irecv(w[to], got, from, 7);
      auto s = isend(w[from], pattern(8, 4), to, 7);
      EXPECT_TRUE(wait_ok(w[from], *s));
      EXPECT_TRUE(wait_ok(w[to], *r));
    }
  }
}

TEST(PipeTransport, IdleRanksKeepHearingEachOtherThroughHeartbeats) {
  // A finished heartbeat's address came back (malloc) for the next heartbeat to
  // another peer, which then looked like the first peer's heartbeat still in
  // flight: that peer never got one again and, after the timeout, counted this
  // rank lost although both were idle and well.
  World w(3, short_heartbeats(), /*heartbeats=*/true);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  expect_every_pair_alive(w);
}

TEST(PipeTransport, RanksWhoseWaitersKeepThePipeBusyStillSendHeartbeats) {
  // Ranks 0 and 1 ping-pong without a pause, so a waiter of theirs always drives
  // the pipe and their progress threads stand down; rank 2 only listens. Heartbeats
  // sent from the progress thread alone would leave rank 2 hearing nothing from 0
  // and 1 for the timeout, and it would declare them lost while they were busy.
  PipeTuning tuning = short_heartbeats();
  tuning.spin_budget = std::chrono::microseconds(5000);
  World w(3, tuning, /*heartbeats=*/true);
  const auto busy_for = std::chrono::milliseconds(1500);
  std::atomic<int> rounds{0};
  // Rank 0 serves until its time is up and says so in the ball; rank 1 returns it.
  std::thread server([&] {
    const auto end = net::Clock::now() + busy_for;
    std::vector<uint8_t> ball(8), back(8);
    for (bool last = false; !last;) {
      last = net::Clock::now() >= end;
      ball[0] = last ? 1 : 0;
      auto s = isend(w[0], ball, 1, 5);
      auto r = irecv(w[0], back, 1, 6);
      if (!wait_ok(w[0], *s) || !wait_ok(w[0], *r)) return;
      rounds.fetch_add(1, std::memory_order_relaxed);
    }
  });
  std::thread returner([&] {
    std::vector<uint8_t> ball(8);
    for (bool last = false; !last;) {
      auto r = irecv(w[1], ball, 0, 5);
      if (!wait_ok(w[1], *r)) return;
      last = ball[0] == 1;
      auto s = isend(w[1], ball, 0, 6);
      if (!wait_ok(w[1], *s)) return;
    }
  });
  server.join();
  returner.join();
  EXPECT_GT(rounds.load(), 10) << "the ranks hardly played";
  // Rank 2 still counts 0 and 1 as alive, and they it.
  expect_every_pair_alive(w);
}

TEST(PipeTransport, YieldSpinningWaiterPollsWhateverTheTuningAndThenBlocks) {
  using namespace std::chrono_literals;
  PipeTuning never_spin;
  never_spin.spin_budget = 0us;
  World w(2, never_spin);
  struct Waited {
    std::chrono::microseconds cpu;
    int64_t polls;  // progress() calls on rank 1's pipe meanwhile
  };
  auto wait_for_late_message = [&](std::chrono::microseconds yield_spin, int64_t tag) {
    std::vector<uint8_t> got(3);
    auto r = irecv(w[1], got, 0, tag);
    r->yield_spin = yield_spin;
    std::thread sender([&] {
      std::this_thread::sleep_for(150ms);
      EXPECT_EQ(wait_error(w[0], *isend(w[0], pattern(3, 9), 1, tag)), nullptr);
    });
    const auto cpu0 = thread_cpu_time();
    const int64_t polls0 = w.fabric.pipe(1).progress_calls();
    EXPECT_EQ(wait_error(w[1], *r), nullptr);
    const Waited waited{thread_cpu_time() - cpu0, w.fabric.pipe(1).progress_calls() - polls0};
    sender.join();
    EXPECT_EQ(got, pattern(3, 9));
    return waited;
  };
  // Counted in polls, not CPU time: a thread that yields on a loaded host (tests or
  // a build beside this one) gets little CPU (three CPU hogs on 2 cores: about 75
  // polls in 150 ms, against 195K when idle), while a blocked waiter leaves the
  // polling to the progress thread, which sleeps between messages (3 - 5 polls).
  EXPECT_GT(wait_for_late_message(1'000'000us, 7).polls, 20) << "the yield-spinning waiter blocked";
  EXPECT_LT(wait_for_late_message(10'000us, 8).cpu, 100ms) << "the waiter polled past its yield_spin";
}

TEST(PipeTransport, PostsWhileTheProgressThreadSleepsInterruptItOnce) {
  using namespace std::chrono_literals;
  World w(2);
  MemoryPipe& pipe = w.fabric.pipe(1);
  // The progress thread asleep in the pipe, and (as on a busy host) not run when
  // interrupted: every post sees it asleep.
  pipe.hold_wakeups(true);
  const auto give_up = std::chrono::steady_clock::now() + 5s;
  while (pipe.sleepers() == 0 && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(1ms);
  ASSERT_GT(pipe.sleepers(), 0) << "the progress thread never slept";
  constexpr int kPosts = 20;
  std::vector<std::vector<uint8_t>> got(kPosts, std::vector<uint8_t>(4));
  std::vector<RequestPtr> recvs;
  const int before = pipe.interrupts();
  for (int i = 0; i < kPosts; ++i) recvs.push_back(irecv(w[1], got[static_cast<size_t>(i)], 0, i));
  const int interrupts = pipe.interrupts() - before;
  pipe.hold_wakeups(false);
  // One wakes the sleeper for all of them; a syscall per post is what a busy
  // host could least afford.
  EXPECT_EQ(interrupts, 1);
  for (int i = 0; i < kPosts; ++i) {
    ASSERT_EQ(wait_error(w[0], *isend(w[0], pattern(4, static_cast<uint8_t>(i)), 1, i)), nullptr);
  }
  for (int i = 0; i < kPosts; ++i) {
    ASSERT_EQ(wait_error(w[1], *recvs[static_cast<size_t>(i)]), nullptr);
    EXPECT_EQ(got[static_cast<size_t>(i)], pattern(4, static_cast<uint8_t>(i)));
  }
}

TEST(PipeTransport, AHandledMessagesReceiveIsPostedAgainAfterTheCallersNextSend) {
  // A ping-pong: the reply leaves before the control receive is posted again
  // (off the round trip's latency path), and a message that arrives before the
  // re-post is received all the same.
  World w(2);
  MemoryPipe& pipe = w.fabric.pipe(1);
  int reply_first = 0;
  for (int round = 0; round < 5; ++round) {
    const auto r8 = static_cast<uint8_t>(round);
    std::vector<uint8_t> got(4);
    auto r = irecv(w[1], got, 0, round);
    ASSERT_EQ(wait_error(w[0], *isend(w[0], pattern(4, r8), 1, round)), nullptr);
    ASSERT_EQ(wait_error(w[1], *r), nullptr);
    EXPECT_EQ(got, pattern(4, r8));
    const size_t mark = pipe.calls().size();
    // Sent to rank 1 before it posts anything again.
    ASSERT_EQ(wait_error(w[0], *isend(w[0], pattern(4, r8 + 1), 1, 100 + round)), nullptr);
    auto reply = isend(w[1], pattern(4, r8 + 2), 0, 200 + round);
    const std::vector<MemoryPipe::Call> calls = pipe.calls();
    // Unless the progress thread re-posted in between (a thread held up for over
    // a millisecond), the reply is the first call past the mark and the re-post
    // comes after it.
    if (calls.size() >= mark + 2 && calls[mark].send && calls[mark].peer == 0 && !calls[mark + 1].send &&
        calls[mark + 1].peer == 0) {
      ++reply_first;
    }
    std::vector<uint8_t> early(4), answer(4);
    ASSERT_EQ(wait_error(w[1], *irecv(w[1], early, 0, 100 + round)), nullptr);
    EXPECT_EQ(early, pattern(4, r8 + 1));
    ASSERT_EQ(wait_error(w[0], *irecv(w[0], answer, 1, 200 + round)), nullptr);
    EXPECT_EQ(answer, pattern(4, r8 + 2));
    ASSERT_EQ(wait_error(w[1], *reply), nullptr);
  }
  EXPECT_GT(reply_first, 0) << "the control receive was posted again before the reply, every round";
}

TEST(PipeTransport, SelfSendsMatchPostedFirstAndUnexpected) {
  World w(1);
  const auto data = pattern(10000, 2);
  std::vector<uint8_t> got(10000);
  auto r = irecv(w[0], got, 0, 1);
  auto s = isend(w[0], data, 0, 1);
  ASSERT_EQ(wait_error(w[0], *r), nullptr);
  ASSERT_EQ(wait_error(w[0], *s), nullptr);
  EXPECT_EQ(got, data);
  auto s2 = isend(w[0], data, 0, 2);
  std::vector<uint8_t> got2(10000);
  auto r2 = irecv(w[0], got2, kAnySource, 2);
  ASSERT_EQ(wait_error(w[0], *r2), nullptr);
  EXPECT_EQ(got2, data);
}

TEST(PipeTransport, RankWithAnotherTokenIsRefusedByEveryone) {
  MemoryFabric fabric(2);
  auto store = std::make_shared<HashStore>(std::chrono::milliseconds(5000));
  std::exception_ptr errors[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        PipeTransport t(fabric.make_pipe(r), auth_for(store, r == 0 ? std::string(kToken) : "another-token"));
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_NE(errors[r], nullptr) << "rank " << r << " accepted a peer with another token";
    EXPECT_THROW(std::rethrow_exception(errors[r]), AuthError);
    EXPECT_NE(error_text(errors[r]).find("does not hold this job's token"), std::string::npos)
        << error_text(errors[r]);
  }
}

TEST(PipeTransport, MessageBeforeTheTokenProofIsRefused) {
  MemoryFabric fabric(2);
  auto store = std::make_shared<HashStore>(std::chrono::milliseconds(5000));
  // Rank 1 is an impostor that speaks the message format without the handshake.
  store->set("pipe/nonce/1", std::vector<uint8_t>(net::kNonceBytes, 7));
  auto impostor = fabric.make_pipe(1);
  const auto header = detail::encode_frame_header(raw_envelope(1, 4), 4);
  std::vector<uint8_t> message(header.size() + 4, 1);
  std::copy(header.begin(), header.end(), message.begin());
  fabric.inject(1, 0, detail::pipe::kControlTag, message);
  try {
    PipeTransport t(fabric.make_pipe(0), auth_for(store));
    FAIL() << "rank 0 accepted a peer that never proved the token";
  } catch (const AuthError& e) {
    EXPECT_NE(std::string(e.what()).find("before proving the token"), std::string::npos) << e.what();
  }
}

TEST(PipeTransport, DestroyingFailsPendingRequestsAsChannelClosed) {
  World w(2);
  std::vector<uint8_t> got(4);
  auto r = irecv(w[1], got, 0, 1);
  w.ranks[1].reset();
  ASSERT_TRUE(r->finished());
  EXPECT_THROW(std::rethrow_exception(r->error), ConnectionError);
  EXPECT_NE(error_text(r->error).find("channel closed"), std::string::npos);
}

}  // namespace
}  // namespace thd::test

namespace thd::test {
namespace {

// ---- messages the pipe matches itself --------------------------------------------------

RequestPtr irecv_any_length(Transport& t, int src, int64_t tag, size_t limit) {
  auto r = new_request(t, "recv_message");
  r->any_length = true;
  r->length_limit = limit;
  t.post_recv({}, src, raw_envelope(tag, 0), r);
  return r;
}

TEST(PipeTransportNative, FittingPointToPointMessagesBypassTheControlTagAndMatchBySourceOrAny) {
  World w(3, PipeTuning{}, false, /*native=*/true);
  const auto a = pattern(40, 1), b = pattern(9000, 2), c = pattern(3, 3);
  std::vector<uint8_t> got_a(40), got_b(9000), got_c(3);
  auto rb = irecv(w[0], got_b, 2, 7);
  auto ra = irecv(w[0], got_a, kAnySource, 7);
  auto sa = isend(w[1], a, 0, 7);
  auto sb = isend(w[2], b, 0, 7);
  auto sc = isend(w[0], c, 0, 8);  // to itself
  auto rc = irecv(w[0], got_c, 0, 8);
  for (auto* r : {&ra, &rb, &rc, &sc}) ASSERT_EQ(wait_error(w[0], **r), nullptr);
  ASSERT_EQ(wait_error(w[1], *sa), nullptr);
  ASSERT_EQ(wait_error(w[2], *sb), nullptr);
  EXPECT_EQ(got_a, a);
  EXPECT_EQ(got_b, b);
  EXPECT_EQ(got_c, c);
  EXPECT_EQ(ra->source, 1);
  EXPECT_EQ(rb->source, 2);
  EXPECT_EQ(rc->source, 0);
  // None of them was a control message: rank 1 sent only its token proofs there.
  for (const auto& call : w.fabric.pipe(1).calls()) {
    const bool proof = call.bytes == detail::pipe::TokenProof::kHelloBytes;
    EXPECT_FALSE(call.send && call.tag == detail::pipe::kControlTag && !proof) << call.bytes << "-byte control message";
  }
  EXPECT_GT(w.fabric.pipe(1).tagged_calls(), 0);
}

TEST(PipeTransportNative, EnvelopesThatDoNotFitTravelAsControlMessages) {
  World w(2, PipeTuning{}, false, /*native=*/true);
  const auto data = pattern(16, 4);
  std::vector<uint8_t> got(16);
  const int before = w.fabric.pipe(0).tagged_calls();
  auto r = irecv(w[1], got, 0, int64_t{1} << 20);  // past the memory pipe's 16 tag bits
  auto s = isend(w[0], data, 1, int64_t{1} << 20);
  ASSERT_EQ(wait_error(w[1], *r), nullptr);
  ASSERT_EQ(wait_error(w[0], *s), nullptr);
  EXPECT_EQ(got, data);
  EXPECT_EQ(w.fabric.pipe(0).tagged_calls(), before);
}

TEST(PipeTransportNative, AReceiveOfAnyLengthIsOwedTheFirstMessageThoughALaterReceiveIsPostedAtOnce) {
  World w(2, PipeTuning{}, false, /*native=*/true);
  // The any-length receive waits for its message's length; the fixed-length one
  // posted after it must not take that message from the library first.
  auto any = irecv_any_length(w[1], kAnySource, 3, 1024);
  std::vector<uint8_t> fixed(8);
  auto later = irecv(w[1], fixed, 0, 3);
  const auto first = pattern(5, 6), second = pattern(8, 7);
  auto s1 = isend(w[0], first, 1, 3);
  auto s2 = isend(w[0], second, 1, 3);
  ASSERT_EQ(wait_error(w[1], *any), nullptr);
  ASSERT_EQ(wait_error(w[1], *later), nullptr) << what(later->error);
  EXPECT_EQ(any->bytes, first.size());
  EXPECT_TRUE(std::equal(first.begin(), first.end(), any->message.get()));
  EXPECT_EQ(fixed, second);
  EXPECT_EQ(any->source, 0);
  ASSERT_EQ(wait_error(w[0], *s1), nullptr);
  ASSERT_EQ(wait_error(w[0], *s2), nullptr);
}

TEST(PipeTransportNative, TheReceiveChecksTheSendersDTypeAndLengthWhenItLands) {
  World w(2, PipeTuning{}, false, /*native=*/true);
  // A tensor where bytes belong: a TypeError naming both kinds.
  Envelope tensor = raw_envelope(4, 2);
  tensor.kind.dtype = static_cast<uint8_t>(DType::Float32);
  const std::vector<uint8_t> four(8, 1);
  std::vector<uint8_t> got(8);
  auto r = irecv(w[1], got, 0, raw_envelope(4, 8));
  isend(w[0], four, 1, tensor);
  EXPECT_TRUE(holds<TypeError>(wait_error(w[1], *r))) << what(r->error);
  // Longer than the receive: a ValueError naming both lengths, nothing past it written.
  std::vector<uint8_t> room(16 + 64, 0xab);
  auto r2 = irecv(w[1], std::span<uint8_t>(room.data(), 16), 0, raw_envelope(5, 16));
  const auto long_message = pattern(100, 8);
  isend(w[0], long_message, 1, 5);
  std::string message;
  EXPECT_TRUE(holds<ValueError>(wait_error(w[1], *r2), &message)) << what(r2->error);
  EXPECT_NE(message.find("100"), std::string::npos) << message;
  EXPECT_NE(message.find("16"), std::string::npos) << message;
  for (size_t i = 16; i < room.size(); ++i) ASSERT_EQ(room[i], 0xab) << i;
  // An any-length receive given a tensor: a TypeError, and the message is gone.
  auto r3 = irecv_any_length(w[1], 0, 6, 1024);
  Envelope tensor6 = tensor;
  tensor6.tag = 6;
  isend(w[0], four, 1, tensor6);
  EXPECT_TRUE(holds<TypeError>(wait_error(w[1], *r3))) << what(r3->error);
  const auto next = pattern(4, 9);
  std::vector<uint8_t> got_next(4);
  auto r4 = irecv(w[1], got_next, 0, 6);
  isend(w[0], next, 1, 6);
  ASSERT_EQ(wait_error(w[1], *r4), nullptr) << what(r4->error);
  EXPECT_EQ(got_next, next);
}

TEST(PipeTransportNative, CancelWithdrawsAPostedAndAHeldBackReceive) {
  World w(2, PipeTuning{}, false, /*native=*/true);
  auto any = irecv_any_length(w[1], 0, 2, 64);
  std::vector<uint8_t> held(4);
  auto behind = irecv(w[1], held, 0, 2);
  w[1].cancel(behind, std::make_exception_ptr(TimeoutError("withdrawn")));
  w[1].cancel(any, std::make_exception_ptr(TimeoutError("withdrawn")));
  EXPECT_TRUE(holds<TimeoutError>(any->error));
  EXPECT_TRUE(holds<TimeoutError>(behind->error));
  // The tag is usable afterwards: the next message goes to the next receive.
  const auto data = pattern(4, 10);
  std::vector<uint8_t> got(4);
  auto r = irecv(w[1], got, 0, 2);
  isend(w[0], data, 1, 2);
  ASSERT_EQ(wait_error(w[1], *r), nullptr);
  EXPECT_EQ(got, data);
}

TEST(PipeTransportNative, AReceiveFromAPeerLostByItsProcessTakesWhatItSentAndOtherwiseFailsAtOnce) {
  // The memory pipe, like UCX, matches tagged receives by tag alone and is not
  // told of a loss the process watch finds: the transport itself must end a
  // receive posted for the lost peer, or it would wait for its deadline.
  StandInProcess rank1_process;
  MemoryFabric fabric(2, /*detects_silent_loss=*/true, /*native=*/true);
  auto t = pair_with_rank1_as(fabric, rank1_process);
  const auto parting = pattern(8, 3);
  ASSERT_TRUE(wait_ok(*t[1], *isend(*t[1], parting, 0, 4)));
  rank1_process.kill();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (t[0]->peer_error(1) == nullptr && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_NE(t[0]->peer_error(1), nullptr) << "the stand-in's death was not noticed";
  std::vector<uint8_t> kept(8), none(8);
  auto taken = irecv(*t[0], kept, 1, 4);
  const auto posted = std::chrono::steady_clock::now();
  auto nothing = irecv(*t[0], none, 1, 5);
  ASSERT_TRUE(wait_ok(*t[0], *taken));
  EXPECT_EQ(kept, parting);
  const auto e = wait_error(*t[0], *nothing, std::chrono::seconds(3));
  EXPECT_TRUE(holds<PeerLost>(e)) << what(e);
  EXPECT_LT(std::chrono::steady_clock::now() - posted, std::chrono::milliseconds(500));
  EXPECT_GT(fabric.pipe(0).tagged_calls(), 0) << "the messages did not take the native path";
}

TEST(PipeTuning, MoreRanksThanCoresYieldWhileSpinning) {
  ScopedEnv spin("THD_PIPE_SPIN_US", nullptr);
  DataChannelOptions o;
  o.world_size = 2;
  {
    ScopedEnv local("LOCAL_WORLD_SIZE", "1");
    const auto t = detail::pipe::pipe_tuning_for(o);
    EXPECT_FALSE(t.yield_while_spinning);
    EXPECT_EQ(t.spin_budget, PipeTuning{}.spin_budget);
  }
  const std::string many = std::to_string(detail::usable_cpus() + 1);
  ScopedEnv local("LOCAL_WORLD_SIZE", many.c_str());
  const auto t = detail::pipe::pipe_tuning_for(o);
  EXPECT_TRUE(t.yield_while_spinning);
  // As long as on a host with room: a waiter that blocks sooner than its peer's
  // answer can come back pays thread wake-ups on every message.
  EXPECT_EQ(t.spin_budget, PipeTuning{}.spin_budget);
  EXPECT_GE(t.spin_budget, std::chrono::microseconds(500));
  {
    // The user's budget stands; 0 still means block at once.
    ScopedEnv user("THD_PIPE_SPIN_US", "0");
    EXPECT_EQ(detail::pipe::pipe_tuning_for(o).spin_budget.count(), 0);
  }
}

TEST(PipeTuning, TheCostOfAYieldThatSwitchesIsTheEnvironmentsWhenGiven) {
  ScopedEnv spin("THD_PIPE_SPIN_US", nullptr);
  DataChannelOptions o;
  o.world_size = 2;
  const std::string many = std::to_string(detail::usable_cpus() + 1);
  ScopedEnv local("LOCAL_WORLD_SIZE", many.c_str());
  {
    ScopedEnv given("THD_PIPE_YIELD_SWITCH_NS", "3500");
    EXPECT_EQ(detail::pipe::pipe_tuning_for(o).yield_switch, std::chrono::nanoseconds(3500));
  }
  for (const char* bad : {"0", "fast", "-5", "2000000"}) {
    SCOPED_TRACE(bad);
    ScopedEnv given("THD_PIPE_YIELD_SWITCH_NS", bad);
    try {
      (void)detail::pipe::pipe_tuning_for(o);
      ADD_FAILURE() << "accepted";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("THD_PIPE_YIELD_SWITCH_NS"), std::string::npos) << e.what();
    }
  }
}

TEST(PipeTuning, TheUnexpectedLimitComesFromTheEnvironment) {
  auto env_of = [](const char* value) {
    return [value](const char* name) -> std::optional<std::string> {
      if (std::string(name) == "THD_MAX_UNEXPECTED_BYTES") return std::string(value);
      return std::nullopt;
    };
  };
  EXPECT_EQ(detail::pipe::pipe_tuning_from_env(env_of("")).unexpected_limit, PipeTuning{}.unexpected_limit);
  EXPECT_EQ(detail::pipe::pipe_tuning_from_env(env_of("2097152")).unexpected_limit, size_t{2097152});
  for (const char* bad : {"12", "lots", "-1", "3MiB"}) {
    SCOPED_TRACE(bad);
    try {
      (void)detail::pipe::pipe_tuning_from_env(env_of(bad));
      ADD_FAILURE() << "accepted";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("THD_MAX_UNEXPECTED_BYTES"), std::string::npos) << e.what();
    }
  }
}

TEST(PipeTuning, NativeMatchingIsOnUnlessTheEnvironmentTurnsItOff) {
  auto env_of = [](const char* value) {
    return [value](const char* name) -> std::optional<std::string> {
      if (std::string(name) == "THD_PIPE_NATIVE_MATCHING") return std::string(value);
      return std::nullopt;
    };
  };
  EXPECT_TRUE(detail::pipe::pipe_tuning_from_env(env_of("")).native_matching);
  EXPECT_FALSE(detail::pipe::pipe_tuning_from_env(env_of("0")).native_matching);
  EXPECT_TRUE(detail::pipe::pipe_tuning_from_env(env_of("1")).native_matching);
  THD_EXPECT_THROW_MSG((void)detail::pipe::pipe_tuning_from_env(env_of("yes")), ValueError,
                       "THD_PIPE_NATIVE_MATCHING must be 0 (off) or 1 (on), got 'yes'");
}

TEST(PipeTuning, TheDirectPathIsOnUnlessTheEnvironmentTurnsItOff) {
  auto env_of = [](const char* value) {
    return [value](const char* name) -> std::optional<std::string> {
      if (std::string(name) == "THD_PIPE_DIRECT") return std::string(value);
      return std::nullopt;
    };
  };
  EXPECT_TRUE(detail::pipe::pipe_tuning_from_env(env_of("")).direct_path);
  EXPECT_FALSE(detail::pipe::pipe_tuning_from_env(env_of("0")).direct_path);
  EXPECT_TRUE(detail::pipe::pipe_tuning_from_env(env_of("1")).direct_path);
  THD_EXPECT_THROW_MSG((void)detail::pipe::pipe_tuning_from_env(env_of("on")), ValueError,
                       "THD_PIPE_DIRECT must be 0 (off) or 1 (on), got 'on'");
}

TEST(PipeTuning, ALauncherCountThatIsNotACountIsRefusedNamingIt) {
  DataChannelOptions o;
  o.world_size = 2;
  for (const char* bad : {"0", "two", "4x", "-1"}) {
    SCOPED_TRACE(bad);
    ScopedEnv local("LOCAL_WORLD_SIZE", bad);
    THD_EXPECT_THROW_MSG((void)detail::pipe::pipe_tuning_for(o), ValueError,
                         std::string("LOCAL_WORLD_SIZE must be a whole number from 1 to 2147483647, not '") + bad + "'");
  }
}

TEST(PipeTuning, LoopbackWorldCountsAsOneHost) {
  ScopedEnv spin("THD_PIPE_SPIN_US", nullptr);
  ScopedEnv local("LOCAL_WORLD_SIZE", nullptr);
  ScopedEnv ompi("OMPI_COMM_WORLD_LOCAL_SIZE", nullptr);
  ScopedEnv mpich("MPI_LOCALNRANKS", nullptr);
  DataChannelOptions o;
  o.world_size = detail::usable_cpus() + 1;
  o.bind_host = "127.0.0.1";
  EXPECT_TRUE(detail::pipe::pipe_tuning_for(o).yield_while_spinning);
  o.bind_host = "10.1.2.3";  // ranks on other hosts: nothing known of this one
  EXPECT_FALSE(detail::pipe::pipe_tuning_for(o).yield_while_spinning);
}

}  // namespace
}  // namespace thd::test
