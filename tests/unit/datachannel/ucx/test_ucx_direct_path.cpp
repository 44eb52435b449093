// PipeTransport's direct path over UCX (pipe_transport.h): small blocking sends
// and receives of natively matched messages go straight to the pipe, keep MPI's
// order with what the general engine posts, check the message's kind and length,
// and end at their deadline. Ranks are threads of this process, over shared
// memory and over TCP loopback.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <thd/interrupt.h>
#include <thd/store.h>

#include "datachannel/net/auth.h"
#include "datachannel/pipe/pipe_test_util.h"
#include "datachannel/pipe/pipe_transport.h"
#include "datachannel/transport_test_util.h"
#include "datachannel/ucx/ucx_pipe.h"
#include "datachannel/ucx/ucx_test_settings.h"

namespace thd::test {
namespace {

using namespace std::chrono_literals;
using detail::RequestSpec;
using detail::pipe::PipeTransport;
using detail::ucx::make_pipe;
using detail::ucx::PipeSettings;

PipeSettings settings_for(const std::string& transports) { return ucx_settings_for(transports); }

// Two PipeTransports over UCX, made and destroyed by one thread per rank.
class DirectPath : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { make_ranks({}); }
  void make_ranks(const detail::pipe::PipeTuning& tuning) {
    auto store = std::make_shared<HashStore>(kLong);
    run_ranks(2, [&](int r) {
      detail::pipe::PipeAuth auth{net::AuthToken(std::string(kToken), "test"), store, kLong};
      ranks_[static_cast<size_t>(r)] = std::make_unique<PipeTransport>(
          make_pipe(options_for(store, r, 2), settings_for(GetParam())), auth, tuning);
    });
  }
  void TearDown() override {
    run_ranks(2, [&](int r) { ranks_[static_cast<size_t>(r)].reset(); });
  }
  PipeTransport& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }

  static RequestSpec spec(int rank, std::chrono::milliseconds timeout = kLong) {
    return {detail::OpLabel::recv_from(1 - rank, 0), net::deadline_after(timeout), rank, false, {}, nullptr};
  }
  // DataChannel's blocking receive's: the deadline counted from the wait.
  static RequestSpec waited_spec(int rank, std::chrono::milliseconds timeout) {
    return {detail::OpLabel::recv_from(1 - rank, 0), {}, rank, false, {}, nullptr, timeout};
  }
  // A blocking send as DataChannel's: send_now, else through send_blocking,
  // waiting for a request it made only if the message did not leave at once.
  static void send(Transport& t, std::span<const uint8_t> data, int dst, const Envelope& e) {
    if (t.send_now(data, dst, e)) return;
    struct Maker {
      Transport* t;
      static std::shared_ptr<RequestState> make(const void* p) {
        return new_request(*static_cast<const Maker*>(p)->t, "send");
      }
    };
    const Maker maker{&t};
    auto request = t.send_blocking(data, dst, e, {&Maker::make, &maker});
    if (request) {
      ASSERT_TRUE(wait_ok(t, *request)) << what(request->error);
    }
  }

 private:
  std::unique_ptr<PipeTransport> ranks_[2];
};

Envelope float_envelope(int64_t tag, size_t elements) {
  Envelope e = raw_envelope(tag, 0);
  e.kind.dtype = static_cast<uint8_t>(kFloat32);
  e.kind.count = elements;
  return e;
}

TEST_P(DirectPath, SmallBlockingMessagesGoStraightToThePipeBothWays) {
  constexpr int kRounds = 200;
  run_ranks(2, [&](int r) {
    Transport& t = rank(r);
    std::vector<uint8_t> out(8), in(8);
    for (int i = 0; i < kRounds; ++i) {
      if (r == 0) {
        std::memcpy(out.data(), &i, sizeof(i));
        send(t, out, 1, raw_envelope(3, 8));
        EXPECT_EQ(t.recv_blocking(in, 1, raw_envelope(3, 8), spec(r)), 1);
        int back = -1;
        std::memcpy(&back, in.data(), sizeof(back));
        EXPECT_EQ(back, i + 1000);
      } else {
        EXPECT_EQ(t.recv_blocking(in, 0, raw_envelope(3, 8), spec(r)), 0);
        int got = -1;
        std::memcpy(&got, in.data(), sizeof(got));
        EXPECT_EQ(got, i);
        got += 1000;
        std::memcpy(out.data(), &got, sizeof(got));
        send(t, out, 0, raw_envelope(3, 8));
      }
    }
  });
  for (int r = 0; r < 2; ++r) {
    const auto counts = rank(r).direct_counts();
    EXPECT_EQ(counts.sends, static_cast<uint64_t>(kRounds)) << "rank " << r;
    EXPECT_EQ(counts.recvs, static_cast<uint64_t>(kRounds)) << "rank " << r;
  }
}

// DataChannel's blocking sends try send_now first: it takes a small message the
// library matches itself and nothing else, and what it refuses it leaves
// untouched for send_blocking.
TEST_P(DirectPath, SendNowTakesOnlyWhatLeavesAtOnce) {
  run_ranks(2, [&](int r) {
    Transport& t = rank(r);
    const size_t large = detail::pipe::PipeEngine::kDirectBytes + 1;
    if (r == 0) {
      const std::vector<uint8_t> small(8, 7), big(large, 9);
      EXPECT_FALSE(t.send_now(big, 1, raw_envelope(4, big.size())));
      EXPECT_FALSE(t.send_now(small, 0, raw_envelope(4, small.size())));  // itself
      EXPECT_FALSE(t.send_now(small, 2, raw_envelope(4, small.size())));  // no such rank
      EXPECT_EQ(rank(0).direct_counts().sends, 0U);
      send(t, big, 1, raw_envelope(4, big.size()));
      EXPECT_TRUE(t.send_now(small, 1, raw_envelope(4, small.size())));
      EXPECT_EQ(rank(0).direct_counts().sends, 1U);
    } else {
      std::vector<uint8_t> big(large), small(8);
      EXPECT_EQ(t.recv_blocking(big, 0, raw_envelope(4, big.size()), spec(r)), 0);
      EXPECT_EQ(big, std::vector<uint8_t>(large, 9));
      EXPECT_EQ(t.recv_blocking(small, 0, raw_envelope(4, small.size()), spec(r)), 0);
      EXPECT_EQ(small, std::vector<uint8_t>(8, 7));
    }
  });
}

TEST_P(DirectPath, TheTuningSwitchSendsEverythingThroughTheEngine) {
  TearDown();
  detail::pipe::PipeTuning tuning;
  tuning.direct_path = false;
  make_ranks(tuning);
  run_ranks(2, [&](int r) {
    Transport& t = rank(r);
    std::vector<uint8_t> word(8, static_cast<uint8_t>(r));
    if (r == 0) {
      send(t, word, 1, raw_envelope(3, 8));
      EXPECT_EQ(t.recv_blocking(word, 1, raw_envelope(3, 8), spec(r)), 1);
      EXPECT_EQ(word, std::vector<uint8_t>(8, 1));
    } else {
      EXPECT_EQ(t.recv_blocking(word, 0, raw_envelope(3, 8), spec(r)), 0);
      std::fill(word.begin(), word.end(), uint8_t{1});
      send(t, word, 0, raw_envelope(3, 8));
    }
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(rank(r).direct_counts().sends, 0U);
    EXPECT_EQ(rank(r).direct_counts().recvs, 0U);
  }
}

TEST_P(DirectPath, AMessageOfAnotherKindOrLengthFailsTheReceiveNamingBoth) {
  run_ranks(2, [&](int r) {
    Transport& t = rank(r);
    if (r == 1) {
      const std::vector<uint8_t> eight(8, 1), twelve(12, 2);
      send(t, eight, 0, raw_envelope(4, 8));     // raw bytes where two floats are expected
      send(t, twelve, 0, raw_envelope(4, 12));   // 12 bytes where 8 are expected
      send(t, eight, 0, float_envelope(4, 2));   // what the receive expects
      return;
    }
    std::vector<uint8_t> in(8);
    EXPECT_THROW(t.recv_blocking(in, 1, float_envelope(4, 2), spec(r)), TypeError);
    try {
      t.recv_blocking(in, 1, raw_envelope(4, 8), spec(r));
      ADD_FAILURE() << "a 12-byte message was taken by an 8-byte receive";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("12"), std::string::npos) << e.what();
    }
    EXPECT_EQ(t.recv_blocking(in, 1, float_envelope(4, 2), spec(r)), 1);
    EXPECT_EQ(in, std::vector<uint8_t>(8, 1));
  });
  EXPECT_EQ(rank(0).direct_counts().recvs, 3U);
}

// Messages that wait in the library before their receive is posted complete it
// inside the post (the receive's callback, with the message's length): checked as
// any other, a too-long one named with its length.
TEST_P(DirectPath, AMessageAlreadyHereCompletesTheReceiveWithItsLengthChecked) {
  run_ranks(2, [&](int r) {
    Transport& t = rank(r);
    if (r == 1) {
      const std::vector<uint8_t> eight(8, 7), twelve(12, 2), one(1, 9);
      send(t, eight, 0, raw_envelope(5, 8));
      send(t, twelve, 0, raw_envelope(5, 12));
      send(t, one, 0, raw_envelope(6, 1));  // sent last, received first
      return;
    }
    // The messages on tag 5 arrived before this one: in order, on one endpoint.
    std::vector<uint8_t> last(1);
    EXPECT_EQ(t.recv_blocking(last, 1, raw_envelope(6, 1), spec(r)), 1);
    EXPECT_EQ(last, std::vector<uint8_t>(1, 9));
    std::vector<uint8_t> in(8);
    EXPECT_EQ(t.recv_blocking(in, 1, raw_envelope(5, 8), spec(r)), 1);
    EXPECT_EQ(in, std::vector<uint8_t>(8, 7));
    try {
      t.recv_blocking(in, 1, raw_envelope(5, 8), spec(r));
      ADD_FAILURE() << "a 12-byte message was taken by an 8-byte receive";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("12"), std::string::npos) << e.what();
    }
  });
  EXPECT_EQ(rank(0).direct_counts().recvs, 3U);
}

// MPI's order: messages from one sender on one tag match receives in the order
// both were posted, whichever path each took.
TEST_P(DirectPath, SendsOnEitherPathKeepTheirOrder) {
  constexpr size_t kLarge = 64 * 1024;
  run_ranks(2, [&](int r) {
    Transport& t = rank(r);
    if (r == 1) {
      const std::vector<uint8_t> large = pattern(kLarge, 5), a(8, 'a'), b(8, 'b'), c(8, 'c');
      auto first = isend(t, large, 0, raw_envelope(6, kLarge));  // the engine's
      send(t, a, 0, raw_envelope(6, 8));                         // direct
      auto second = isend(t, b, 0, raw_envelope(6, 8));          // the engine's
      send(t, c, 0, raw_envelope(6, 8));                         // direct
      EXPECT_TRUE(wait_ok(t, *first)) << what(first->error);
      EXPECT_TRUE(wait_ok(t, *second)) << what(second->error);
      return;
    }
    std::vector<uint8_t> large(kLarge), in(8);
    EXPECT_EQ(t.recv_blocking(large, 1, raw_envelope(6, kLarge), spec(r)), 1);  // the engine's (too large)
    EXPECT_EQ(large, pattern(kLarge, 5));
    for (char expected : {'a', 'b', 'c'}) {
      EXPECT_EQ(t.recv_blocking(in, 1, raw_envelope(6, 8), spec(r)), 1);
      EXPECT_EQ(in, std::vector<uint8_t>(8, static_cast<uint8_t>(expected)));
    }
  });
  // A send UCX cannot finish within the call (behind the rendezvous still under
  // way) leaves on the general path: at least the last one is direct.
  EXPECT_GE(rank(1).direct_counts().sends, 1U);
  EXPECT_EQ(rank(0).direct_counts().recvs, 3U);
}

// A receive of any length the engine holds back (it waits for its message's
// length before it posts it) is owed the next message: a blocking receive
// posted after it must not go to the library ahead of it.
TEST_P(DirectPath, ABlockingReceiveDoesNotOvertakeAReceiveHeldBack) {
  std::atomic<bool> posted{false};
  run_ranks(2, [&](int r) {
    Transport& t = rank(r);
    if (r == 1) {
      while (!posted.load()) std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(50ms);  // rank 0 is in its blocking receive by now
      const std::vector<uint8_t> first(16, 'f'), second(8, 's');
      send(t, first, 0, raw_envelope(7, 16));
      send(t, second, 0, raw_envelope(7, 8));
      return;
    }
    auto any = new_request(t, "recv_message from rank 1");
    any->any_length = true;
    any->length_limit = 1024;
    t.post_recv({}, 1, raw_envelope(7, 0), any);
    posted.store(true);
    std::vector<uint8_t> in(8);
    EXPECT_EQ(t.recv_blocking(in, 1, raw_envelope(7, 8), spec(r)), 1);
    EXPECT_EQ(in, std::vector<uint8_t>(8, 's'));
    ASSERT_TRUE(wait_ok(t, *any)) << what(any->error);
    EXPECT_EQ(any->bytes, 16U);
    EXPECT_EQ(std::memcmp(any->message.get(), std::vector<uint8_t>(16, 'f').data(), 16), 0);
  });
  EXPECT_EQ(rank(0).direct_counts().recvs, 0U) << "the receive went past the one held back";
}

TEST_P(DirectPath, AReceiveEndsAtItsDeadlineAndTakesNothingAfter) {
  run_ranks(2, [&](int r) {
    Transport& t = rank(r);
    std::vector<uint8_t> in(8);
    if (r == 0) {
      const auto start = net::Clock::now();
      EXPECT_THROW(t.recv_blocking(in, 1, raw_envelope(9, 8), spec(r, 200ms)), TimeoutError);
      const auto waited = net::Clock::now() - start;
      EXPECT_GE(waited, 150ms);
      EXPECT_LT(waited, 3s);
      EXPECT_EQ(rank(0).direct_counts().recvs, 1U);
      // The withdrawn receive is gone from the library: the next one gets the message.
      const std::vector<uint8_t> go(8, 'g');
      send(t, go, 1, raw_envelope(10, 8));
      EXPECT_EQ(t.recv_blocking(in, 1, raw_envelope(9, 8), spec(r)), 1);
      EXPECT_EQ(in, std::vector<uint8_t>(8, 'm'));
    } else {
      EXPECT_EQ(t.recv_blocking(in, 0, raw_envelope(10, 8), spec(r)), 0);
      const std::vector<uint8_t> message(8, 'm');
      send(t, message, 0, raw_envelope(9, 8));
    }
  });
}

// A deadline counted from the wait (fixed at the spin's first clock read, or when
// it blocks) ends the receive as one fixed at the call does, withdrawn.
TEST_P(DirectPath, AReceiveWhoseDeadlineCountsFromItsWaitEndsOnTime) {
  run_ranks(2, [&](int r) {
    Transport& t = rank(r);
    std::vector<uint8_t> in(8);
    if (r == 0) {
      const auto start = net::Clock::now();
      try {
        t.recv_blocking(in, 1, raw_envelope(13, 8), waited_spec(r, 200ms));
        ADD_FAILURE() << "the receive did not time out";
      } catch (const TimeoutError& e) {
        EXPECT_NE(std::string(e.what()).find("did not complete before its deadline"), std::string::npos) << e.what();
      }
      const auto waited = net::Clock::now() - start;
      EXPECT_GE(waited, 200ms);
      EXPECT_LT(waited, 3s);
      const std::vector<uint8_t> go(8, 'g');
      send(t, go, 1, raw_envelope(14, 8));
      EXPECT_EQ(t.recv_blocking(in, 1, raw_envelope(13, 8), waited_spec(r, kLong)), 1);
      EXPECT_EQ(in, std::vector<uint8_t>(8, 'm'));
    } else {
      EXPECT_EQ(t.recv_blocking(in, 0, raw_envelope(14, 8), waited_spec(r, kLong)), 0);
      const std::vector<uint8_t> message(8, 'm');
      send(t, message, 0, raw_envelope(13, 8));
    }
  });
}

// A spinning waiter reads the clock a few rounds in: a request found finished
// before then leaves a deadline counted from the wait open.
TEST_P(DirectPath, ASpinThatEndsAtOnceLeavesTheDeadlineOpen) {
  run_ranks(2, [&](int r) {
    if (r != 0) return;
    RequestState s(waited_spec(r, kLong), &rank(r));
    ASSERT_TRUE(s.complete(1, 8));
    EXPECT_TRUE(rank(r).wait_own(s));
    EXPECT_FALSE(s.deadline_fixed());
    RequestState pending(waited_spec(r, 50ms), &rank(r));
    EXPECT_FALSE(rank(r).wait_own(pending));
    EXPECT_TRUE(pending.deadline_fixed());
  });
}

// A spinning waiter takes the engine lock for one round at a time and defers to
// a thread blocked on it (engine_lock.h): another thread of its rank that needs
// the lock (here, to send the very message that answers the waiter) gets it
// within a round, not when the spin ends. The spin here would last 20 s.
TEST_P(DirectPath, ASpinningWaiterLetsAnotherThreadOfItsRankIn) {
  TearDown();
  detail::pipe::PipeTuning tuning;
  tuning.spin_budget = 20s;
  make_ranks(tuning);
  std::atomic<bool> spinning{false};
  run_ranks(2, [&](int r) {
    Transport& t = rank(r);
    std::vector<uint8_t> in(8);
    if (r == 1) {
      EXPECT_EQ(t.recv_blocking(in, 0, raw_envelope(20, 8), spec(r)), 0);
      send(t, in, 0, raw_envelope(21, 8));
      return;
    }
    std::thread sender([&] {
      while (!spinning.load()) std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(20ms);  // the waiter spins by now
      const std::vector<uint8_t> ask(8, 'q');
      send(t, ask, 1, raw_envelope(20, 8));
    });
    const auto start = net::Clock::now();
    spinning.store(true);
    int from = -1;
    try {
      from = t.recv_blocking(in, 1, raw_envelope(21, 8), spec(r));
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
    const auto waited = net::Clock::now() - start;
    sender.join();
    EXPECT_EQ(from, 1);
    EXPECT_LT(waited, 5s) << "the sender waited for the spin to end";
    EXPECT_EQ(in, std::vector<uint8_t>(8, 'q'));
  });
}

// Threads of each rank ping-pong at once, each on its own tag, through blocking
// sends and receives: they post while others spin on the engine lock, and one
// thread's rounds finish others' receives. A short spin makes some of them block,
// so the progress thread finishes those. Every message lands in its own receive.
TEST_P(DirectPath, ThreadsPingPongingAtOnceEachGetTheirOwnMessages) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 300;
  for (auto spin : {std::chrono::microseconds(1000), std::chrono::microseconds(5)}) {
    TearDown();
    detail::pipe::PipeTuning tuning;
    tuning.spin_budget = spin;
    make_ranks(tuning);
    run_ranks(2, [&](int r) {
      Transport& t = rank(r);
      std::vector<std::thread> threads;
      for (int k = 0; k < kThreads; ++k) {
        threads.emplace_back([&, k] {
          const int64_t tag = 30 + k;
          std::vector<uint8_t> out(8), in(8);
          for (int i = 0; i < kRounds; ++i) {
            const int word = k * 100000 + i;
            if (r == 0) {
              std::memcpy(out.data(), &word, sizeof(word));
              send(t, out, 1, raw_envelope(tag, 8));
              ASSERT_EQ(t.recv_blocking(in, 1, raw_envelope(tag, 8), spec(r)), 1);
              int back = -1;
              std::memcpy(&back, in.data(), sizeof(back));
              ASSERT_EQ(back, word + 7) << "thread " << k << " round " << i;
            } else {
              ASSERT_EQ(t.recv_blocking(in, 0, raw_envelope(tag, 8), spec(r)), 0);
              int got = -1;
              std::memcpy(&got, in.data(), sizeof(got));
              ASSERT_EQ(got, word) << "thread " << k << " round " << i;
              got += 7;
              std::memcpy(out.data(), &got, sizeof(got));
              send(t, out, 0, raw_envelope(tag, 8));
            }
          }
        });
      }
      for (auto& thread : threads) thread.join();
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(rank(r).direct_counts().recvs, static_cast<uint64_t>(kThreads * kRounds)) << "rank " << r;
    }
  }
}

// The host's interrupt check (thd/interrupt.h) ends a wait the way its deadline
// does: the receive is withdrawn before the check's exception leaves, and takes
// nothing after.
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted by the test's check") {}
};
std::atomic<bool> g_interrupt{false};
void throw_when_asked() {
  if (g_interrupt.load()) throw Interrupted();
}

TEST_P(DirectPath, AnInterruptCheckThatThrowsWithdrawsTheReceive) {
  set_interrupt_check(&throw_when_asked);
  g_interrupt.store(true);
  run_ranks(2, [&](int r) {
    Transport& t = rank(r);
    std::vector<uint8_t> in(8);
    if (r == 0) {
      const auto start = net::Clock::now();
      EXPECT_THROW(t.recv_blocking(in, 1, raw_envelope(11, 8), spec(r)), Interrupted);
      EXPECT_LT(net::Clock::now() - start, 2s);
      g_interrupt.store(false);
      EXPECT_EQ(rank(0).direct_counts().recvs, 1U);
      const std::vector<uint8_t> go(8, 'g');
      send(t, go, 1, raw_envelope(12, 8));
      EXPECT_EQ(t.recv_blocking(in, 1, raw_envelope(11, 8), spec(r)), 1);
      EXPECT_EQ(in, std::vector<uint8_t>(8, 'm'));
    } else {
      // Waits out rank 0's interrupted receive (its own waits check too: it
      // retries until the check lets it through).
      for (;;) {
        try {
          EXPECT_EQ(t.recv_blocking(in, 0, raw_envelope(12, 8), spec(r)), 0);
          break;
        } catch (const Interrupted&) {
        }
      }
      const std::vector<uint8_t> message(8, 'm');
      send(t, message, 0, raw_envelope(11, 8));
    }
  });
  set_interrupt_check(nullptr);
}

TEST_P(DirectPath, AnInterruptCheckThatThrowsWithdrawsAReceiveOnTheEnginesPathToo) {
  // Past kDirectBytes: the receive is the engine's, its request on the waiter's
  // stack; left posted, the message below would land in a dead frame.
  constexpr size_t kBytes = detail::pipe::PipeEngine::kDirectBytes + 1;
  set_interrupt_check(&throw_when_asked);
  g_interrupt.store(true);
  run_ranks(2, [&](int r) {
    Transport& t = rank(r);
    if (r == 0) {
      std::vector<uint8_t> in(kBytes);
      const auto start = net::Clock::now();
      EXPECT_THROW(t.recv_blocking(in, 1, raw_envelope(11, kBytes), spec(r)), Interrupted);
      EXPECT_LT(net::Clock::now() - start, 2s);
      g_interrupt.store(false);
      EXPECT_EQ(rank(0).direct_counts().recvs, 0U);
      const std::vector<uint8_t> go(8, 'g');
      send(t, go, 1, raw_envelope(12, 8));
      EXPECT_EQ(t.recv_blocking(in, 1, raw_envelope(11, kBytes), spec(r)), 1);
      EXPECT_EQ(in, std::vector<uint8_t>(kBytes, 'm'));
    } else {
      std::vector<uint8_t> in(8);
      for (;;) {
        try {
          EXPECT_EQ(t.recv_blocking(in, 0, raw_envelope(12, 8), spec(r)), 0);
          break;
        } catch (const Interrupted&) {
        }
      }
      const std::vector<uint8_t> message(kBytes, 'm');
      send(t, message, 0, raw_envelope(11, kBytes));
    }
  });
  set_interrupt_check(nullptr);
}

INSTANTIATE_TEST_SUITE_P(Transports, DirectPath, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace thd::test
