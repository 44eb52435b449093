// The ucx backend's MessagePipe: set-up and its errors, sizes from 0 B to 16 MiB,
// order on one tag, independent tags, unexpected messages, truncation, cancel,
// sleeping (interrupt, incoming data, deadline, CPU), and lost peers. Every
// transfer test runs over UCX's shared-memory transports and over TCP, picked
// through PipeSettings (no setenv). Ranks are threads over a HashStore; the
// killed-peer test re-runs this binary as the peer process.
#include <gtest/gtest.h>

#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <thd/store.h>

#include "datachannel/pipe/pipe_test_util.h"
#include "datachannel/transport_test_util.h"
#include "datachannel/ucx/tag_layout.h"
#include "datachannel/ucx/ucx_message_pipe.h"
#include "datachannel/ucx/ucx_pipe.h"

namespace thd {
namespace {

using namespace std::chrono_literals;
using detail::pipe::MessagePipe;
using detail::pipe::PipeOp;
using detail::ucx::make_pipe;
using detail::ucx::PipeSettings;
using PipePtr = std::unique_ptr<MessagePipe>;
using test::options_for;
using test::TestOp;

struct Transports {
  std::string name;
  std::vector<std::pair<std::string, std::string>> ucx_config;
};

// Shared memory (posix/sysv, cma) and TCP over loopback only.
const Transports kShm{"shm", {{"TLS", "sm,self"}}};
const Transports kTcp{"tcp", {{"TLS", "tcp"}, {"NET_DEVICES", "lo"}}};

PipeSettings settings_for(const Transports& t) {
  PipeSettings s;
  s.ucx_config = t.ucx_config;
  s.close_timeout = 1s;
  return s;
}


// Pipes of one world, made by one thread per rank (make_pipe waits for the
// others) and destroyed the same way (each destructor says goodbye to the rest).
class World {
 public:
  World(int size, const PipeSettings& settings) : pipes_(static_cast<size_t>(size)) {
    auto store = std::make_shared<HashStore>(test::kLong);
    test::run_ranks(size,
                    [&](int r) { pipes_[static_cast<size_t>(r)] = make_pipe(options_for(store, r, size), settings); });
  }
  ~World() {
    test::run_rank_threads(static_cast<int>(pipes_.size()), [&](int r) { pipes_[static_cast<size_t>(r)].reset(); });
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  MessagePipe& operator[](int r) { return *pipes_[static_cast<size_t>(r)]; }
  PipePtr& at(int r) { return pipes_[static_cast<size_t>(r)]; }
  int size() const { return static_cast<int>(pipes_.size()); }

  // Drives every pipe's progress (or only those of `ranks`) from this thread
  // until `done` or the timeout.
  bool drive_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = test::kLong,
                   const std::vector<int>& ranks = {}) {
    const auto deadline = test::in(timeout);
    while (!done()) {
      if (net::Clock::now() >= deadline) return false;
      for (int r = 0; r < size(); ++r) {
        const bool chosen = ranks.empty() || std::find(ranks.begin(), ranks.end(), r) != ranks.end();
        if (chosen && pipes_[static_cast<size_t>(r)]) pipes_[static_cast<size_t>(r)]->progress();
      }
    }
    return true;
  }
  bool drive_until_finished(const std::vector<const TestOp*>& ops, std::chrono::milliseconds timeout = test::kLong,
                            const std::vector<int>& ranks = {}) {
    return drive_until(
        [&] {
          for (const TestOp* op : ops) {
            if (!op->finished()) return false;
          }
          return true;
        },
        timeout, ranks);
  }

 private:
  std::vector<PipePtr> pipes_;
};

// Drives one pipe the way PipeTransport does when it waits: progress, and sleep
// once arm() says there is nothing to do.
bool wait_sleeping(MessagePipe& pipe, const TestOp& op, std::chrono::milliseconds timeout = test::kLong) {
  const auto deadline = test::in(timeout);
  while (!op.finished()) {
    if (net::Clock::now() >= deadline) return false;
    if (pipe.progress() > 0) continue;
    if (pipe.arm()) pipe.sleep(deadline, true);
  }
  return true;
}

// The CPU time of this thread and of UCX's own threads (named "async"): what a
// sleeping pipe costs. The rest of the process is left out: OpenBLAS's threads
// spin for a while after they start, in every fresh test process.
std::chrono::nanoseconds pipe_cpu_time() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  std::chrono::nanoseconds total = std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
  const long tick_ns = 1'000'000'000L / ::sysconf(_SC_CLK_TCK);
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name != "async") continue;
    std::ifstream stat_file(task.path() / "stat");
    std::string stat;
    std::getline(stat_file, stat);
    // Fields after the ")" that ends the name: state is the 3rd, utime the 14th, stime the 15th.
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    long long utime = 0, stime = 0;
    for (int i = 3; fields >> field && i <= 15; ++i) {
      if (i == 14) utime = std::stoll(field);
      if (i == 15) stime = std::stoll(field);
    }
    total += std::chrono::nanoseconds((utime + stime) * tick_ns);
  }
  return total;
}

std::span<const uint8_t> bytes_of(const std::vector<uint8_t>& v) { return {v.data(), v.size()}; }
std::span<uint8_t> bytes_of(std::vector<uint8_t>& v) { return {v.data(), v.size()}; }

class UcxPipe : public ::testing::TestWithParam<Transports> {
 protected:
  PipeSettings settings() const { return settings_for(GetParam()); }
};

// ---- transfers ----------------------------------------------------------------------

TEST_P(UcxPipe, SmallMediumAndLargeMessagesArriveIntactBothWays) {
  World w(2, settings());
  for (size_t size : {size_t{8}, size_t{64} << 10, size_t{16} << 20}) {
    for (int from : {0, 1}) {
      const int to = 1 - from;
      const std::vector<uint8_t> out = test::pattern(size, static_cast<uint32_t>(size) + from);
      std::vector<uint8_t> in(size, 0);
      TestOp sent, received;
      w[to].recv(from, 7, bytes_of(in), &received);
      w[from].send(to, 7, bytes_of(out), &sent);
      ASSERT_TRUE(w.drive_until_finished({&sent, &received})) << size << " bytes from rank " << from;
      EXPECT_EQ(sent.error(), nullptr) << test::what(sent.error());
      EXPECT_EQ(received.error(), nullptr) << test::what(received.error());
      EXPECT_EQ(sent.bytes(), size);
      EXPECT_EQ(received.bytes(), size);
      EXPECT_TRUE(in == out) << size << " bytes from rank " << from << " arrived changed";
      w.drive_until([] { return false; }, 2ms);
      EXPECT_EQ(sent.calls(), 1);
      EXPECT_EQ(received.calls(), 1);
    }
  }
}

TEST_P(UcxPipe, MessagesOnOneTagMatchInSendOrderAcrossEagerAndRendezvous) {
  World w(2, settings());
  constexpr int kCount = 120;
  // Small and large messages alternate, so eager ones could overtake rendezvous ones
  // if the order were not kept.
  auto size_of = [](int i) { return i % 3 == 0 ? size_t{200} << 10 : size_t{16} + static_cast<size_t>(i); };
  std::vector<std::vector<uint8_t>> out, in;
  for (int i = 0; i < kCount; ++i) {
    out.push_back(test::pattern(size_of(i), static_cast<uint32_t>(i)));
    in.emplace_back(size_of(i), 0);
  }
  std::vector<TestOp> sent(kCount), received(kCount);
  // Half the receives are posted before the sends, half after (unexpected).
  for (int i = 0; i < kCount / 2; ++i)
    w[1].recv(0, 3, bytes_of(in[static_cast<size_t>(i)]), &received[static_cast<size_t>(i)]);
  for (int i = 0; i < kCount; ++i)
    w[0].send(1, 3, bytes_of(out[static_cast<size_t>(i)]), &sent[static_cast<size_t>(i)]);
  w.drive_until([] { return false; }, 50ms);
  for (int i = kCount / 2; i < kCount; ++i)
    w[1].recv(0, 3, bytes_of(in[static_cast<size_t>(i)]), &received[static_cast<size_t>(i)]);
  std::vector<const TestOp*> all;
  for (auto& op : sent) all.push_back(&op);
  for (auto& op : received) all.push_back(&op);
  ASSERT_TRUE(w.drive_until_finished(all));
  for (int i = 0; i < kCount; ++i) {
    const size_t k = static_cast<size_t>(i);
    EXPECT_EQ(received[k].error(), nullptr) << i << ": " << test::what(received[k].error());
    EXPECT_EQ(received[k].bytes(), size_of(i));
    EXPECT_TRUE(in[k] == out[k]) << "message " << i << " is not the " << i << "th sent";
  }
}

TEST_P(UcxPipe, TagsMatchIndependently) {
  World w(2, settings());
  const std::vector<uint8_t> one = test::pattern(100, 1), two = test::pattern(300, 2);
  std::vector<uint8_t> in_one(100), in_two(300);
  TestOp recv_two, recv_one, send_one, send_two;
  w[1].recv(0, 2, bytes_of(in_two), &recv_two);  // posted first, its message comes last
  w[1].recv(0, 1, bytes_of(in_one), &recv_one);
  w[0].send(1, 1, bytes_of(one), &send_one);
  ASSERT_TRUE(w.drive_until_finished({&send_one, &recv_one}));
  EXPECT_FALSE(recv_two.finished()) << "the tag-2 receive took the tag-1 message";
  EXPECT_TRUE(in_one == one);
  w[0].send(1, 2, bytes_of(two), &send_two);
  ASSERT_TRUE(w.drive_until_finished({&send_two, &recv_two}));
  EXPECT_EQ(recv_two.error(), nullptr) << test::what(recv_two.error());
  EXPECT_TRUE(in_two == two);
  // The whole tag range is usable.
  EXPECT_EQ(w[0].max_tag(), 0xffffffffU);
  TestOp send_max, recv_max;
  std::vector<uint8_t> in_max(100);
  w[0].send(1, w[0].max_tag(), bytes_of(one), &send_max);
  w[1].recv(0, w[1].max_tag(), bytes_of(in_max), &recv_max);
  ASSERT_TRUE(w.drive_until_finished({&send_max, &recv_max}));
  EXPECT_TRUE(in_max == one);
}

TEST_P(UcxPipe, UnexpectedMessagesWaitForTheirReceive) {
  World w(2, settings());
  for (size_t size : {size_t{64}, size_t{4} << 20}) {
    const std::vector<uint8_t> out = test::pattern(size, 11);
    std::vector<uint8_t> in(size);
    TestOp sent, received;
    w[0].send(1, 9, bytes_of(out), &sent);
    w.drive_until([] { return false; }, 100ms);  // arrives (or is announced) with no receive posted
    EXPECT_FALSE(received.finished());
    w[1].recv(0, 9, bytes_of(in), &received);
    ASSERT_TRUE(w.drive_until_finished({&sent, &received})) << size;
    EXPECT_EQ(received.error(), nullptr) << test::what(received.error());
    EXPECT_TRUE(in == out) << size;
  }
}

TEST_P(UcxPipe, OpsUcxFinishesAtOnceAreReportedBeforeTheCallReturns) {
  // A small eager send is copied out inside ucp_tag_send_nbx, and a receive of a
  // message already here is filled inside ucp_tag_recv_nbx: their done() comes
  // before send()/recv() return, with no progress() call (the caller's request is
  // complete before it waits).
  World w(2, settings());
  const std::vector<uint8_t> out = test::pattern(8, 3);
  std::vector<uint8_t> in(8);
  TestOp sent, received;
  w[0].send(1, 6, bytes_of(out), &sent);
  EXPECT_TRUE(sent.finished()) << "an 8-byte send was left for the next progress()";
  w.drive_until([] { return false; }, 100ms);  // the message reaches rank 1, unexpected
  w[1].recv(0, 6, bytes_of(in), &received);
  EXPECT_TRUE(received.finished()) << "a receive of a message already here was left for the next progress()";
  ASSERT_TRUE(w.drive_until_finished({&sent, &received}));
  EXPECT_EQ(received.error(), nullptr) << test::what(received.error());
  EXPECT_TRUE(in == out);
}

TEST_P(UcxPipe, SendAtOnceTakesSmallMessagesWholeInOrderWithSend) {
  // send_at_once is UCX's short path: the bytes are copied out before it returns
  // (the caller's buffer is overwritten at once here), and a message it takes
  // matches in send order with those that send() carries on the same tag.
  World w(2, settings());
  const std::vector<uint8_t> first = test::pattern(56, 1), third = test::pattern(40, 3);
  const std::vector<uint8_t> second = test::pattern(64 << 10, 2);  // rendezvous, through send()
  TestOp first_fallback, second_sent, third_fallback;
  std::vector<const TestOp*> sends{&second_sent};
  // send_at_once, or send() where the transport refuses (tcp may; shm must not).
  auto send_small = [&](const std::vector<uint8_t>& message, TestOp* fallback) {
    std::vector<uint8_t> scratch = message;
    const bool took = w[0].send_at_once(1, 9, bytes_of(scratch));
    std::fill(scratch.begin(), scratch.end(), 0xee);
    if (!took) {
      w[0].send(1, 9, bytes_of(message), fallback);
      sends.push_back(fallback);
    }
    return took;
  };
  const bool took = send_small(first, &first_fallback);
  if (GetParam().name == "shm") {
    EXPECT_TRUE(took) << "a 56-byte message did not take UCX's short path";
  }
  w[0].send(1, 9, bytes_of(second), &second_sent);
  send_small(third, &third_fallback);
  std::vector<uint8_t> in1(first.size()), in2(second.size()), in3(third.size());
  TestOp got1, got2, got3;
  w[1].recv(0, 9, bytes_of(in1), &got1);
  w[1].recv(0, 9, bytes_of(in2), &got2);
  w[1].recv(0, 9, bytes_of(in3), &got3);
  ASSERT_TRUE(w.drive_until_finished({&got1, &got2, &got3}));
  ASSERT_TRUE(w.drive_until_finished(sends));
  for (const TestOp* op : {&got1, &got2, &got3}) EXPECT_EQ(op->error(), nullptr) << test::what(op->error());
  EXPECT_TRUE(in1 == first);
  EXPECT_TRUE(in2 == second);
  EXPECT_TRUE(in3 == third);
}

TEST_P(UcxPipe, SendAtOnceSendsNothingWhenItCannotFinishAndNothingToALostPeer) {
  World w(2, settings());
  // Past UCX's short path: refused, and nothing arrives.
  const std::vector<uint8_t> big = test::pattern(1 << 20, 4);
  EXPECT_FALSE(w[0].send_at_once(1, 3, bytes_of(big)));
  const std::vector<uint8_t> small = test::pattern(8, 5);
  TestOp sent;
  w[0].send(1, 3, bytes_of(small), &sent);
  std::vector<uint8_t> in(big.size());
  TestOp received;
  w[1].recv(0, 3, bytes_of(in), &received);
  ASSERT_TRUE(w.drive_until_finished({&sent, &received}));
  EXPECT_EQ(received.error(), nullptr) << test::what(received.error());
  EXPECT_EQ(received.bytes(), small.size()) << "the refused message arrived after all";
  // A peer that went: refused, for send() to report.
  std::thread closer([&] { w.at(1).reset(); });
  std::vector<uint8_t> never(8);
  TestOp pending;
  w[0].recv(1, 4, bytes_of(never), &pending);
  ASSERT_TRUE(wait_sleeping(w[0], pending, 5s));
  closer.join();
  EXPECT_FALSE(w[0].send_at_once(1, 3, bytes_of(small)));
  EXPECT_THROW(w[0].send_at_once(0, 3, bytes_of(small)), ValueError);
  EXPECT_THROW(w[0].send_at_once(2, 3, bytes_of(small)), ValueError);
}

TEST_P(UcxPipe, ZeroLengthMessages) {
  World w(2, settings());
  TestOp sent, received, sent_empty_span, received_empty_span;
  uint8_t unused = 0;
  w[1].recv(0, 4, std::span<uint8_t>(&unused, 0), &received);
  w[0].send(1, 4, std::span<const uint8_t>(&unused, 0), &sent);
  w[1].recv(0, 5, std::span<uint8_t>(), &received_empty_span);
  w[0].send(1, 5, std::span<const uint8_t>(), &sent_empty_span);
  ASSERT_TRUE(w.drive_until_finished({&sent, &received, &sent_empty_span, &received_empty_span}));
  for (const TestOp* op : {&sent, &received, &sent_empty_span, &received_empty_span}) {
    EXPECT_EQ(op->error(), nullptr) << test::what(op->error());
    EXPECT_EQ(op->bytes(), 0u);
  }
}

TEST_P(UcxPipe, LongerMessageFailsTheReceiveNamingBothSizesWithoutOverrun) {
  World w(2, settings());
  for (auto [sent_size, room] : {std::pair{size_t{100}, size_t{40}}, std::pair{size_t{1} << 20, size_t{300} << 10}}) {
    for (bool posted_first : {true, false}) {
      const std::vector<uint8_t> out = test::pattern(sent_size, 5);
      constexpr size_t kGuard = 4096;
      std::vector<uint8_t> in(room + kGuard, 0xab);
      TestOp sent, received;
      if (posted_first) w[1].recv(0, 6, std::span<uint8_t>(in.data(), room), &received);
      w[0].send(1, 6, bytes_of(out), &sent);
      if (!posted_first) {
        w.drive_until([] { return false; }, 30ms);
        w[1].recv(0, 6, std::span<uint8_t>(in.data(), room), &received);
      }
      ASSERT_TRUE(w.drive_until_finished({&sent, &received})) << sent_size;
      std::string message;
      EXPECT_TRUE(test::holds<ValueError>(received.error(), &message)) << test::what(received.error());
      EXPECT_NE(message.find(std::to_string(room)), std::string::npos) << message;
      EXPECT_NE(message.find(std::to_string(sent_size)), std::string::npos) << message;
      for (size_t i = room; i < in.size(); ++i) {
        ASSERT_EQ(in[i], 0xab) << "byte " << i << " past the receive's " << room << " was written";
      }
      // The pair goes on working afterwards.
      std::vector<uint8_t> next(16);
      const std::vector<uint8_t> next_out = test::pattern(16, 9);
      TestOp sent_next, received_next;
      w[1].recv(0, 6, bytes_of(next), &received_next);
      w[0].send(1, 6, bytes_of(next_out), &sent_next);
      ASSERT_TRUE(w.drive_until_finished({&sent_next, &received_next}));
      EXPECT_TRUE(next == next_out);
    }
  }
}

TEST_P(UcxPipe, CancelWithdrawsOnlyAReceiveNotYetMatched) {
  World w(2, settings());
  std::vector<uint8_t> withdrawn(32, 0), taker(32, 0);
  TestOp cancelled, later, sent;
  w[1].recv(0, 8, bytes_of(withdrawn), &cancelled);
  EXPECT_TRUE(w[1].cancel(&cancelled));
  EXPECT_FALSE(w[1].cancel(&cancelled)) << "withdrawn twice";
  const std::vector<uint8_t> out = test::pattern(32, 3);
  w[0].send(1, 8, bytes_of(out), &sent);
  w[1].recv(0, 8, bytes_of(taker), &later);
  ASSERT_TRUE(w.drive_until_finished({&sent, &later}));
  EXPECT_TRUE(taker == out);
  EXPECT_EQ(cancelled.calls(), 0) << "a withdrawn receive was told it finished";
  EXPECT_TRUE(std::all_of(withdrawn.begin(), withdrawn.end(), [](uint8_t b) { return b == 0; }));

  // A large send waits for its receive; cancel cannot withdraw it, and done() comes.
  const std::vector<uint8_t> big = test::pattern(size_t{8} << 20, 4);
  std::vector<uint8_t> big_in(big.size());
  TestOp big_sent, big_received;
  w[0].send(1, 12, bytes_of(big), &big_sent);
  w.drive_until([] { return false; }, 20ms);
  if (!big_sent.finished()) {
    EXPECT_FALSE(w[0].cancel(&big_sent));
  }
  // Its announcement is here, so the receive is matched as it is posted: too late
  // to withdraw, and it completes.
  w[1].recv(0, 12, bytes_of(big_in), &big_received);
  EXPECT_FALSE(w[1].cancel(&big_received));
  ASSERT_TRUE(w.drive_until_finished({&big_sent, &big_received}));
  EXPECT_EQ(big_received.error(), nullptr) << test::what(big_received.error());
  EXPECT_EQ(big_sent.calls(), 1);
  EXPECT_EQ(big_received.calls(), 1);
  EXPECT_TRUE(big_in == big);
}

// forget(): the op is never told, whatever becomes of its request, and a later
// op at the same address is not mistaken for it.
TEST_P(UcxPipe, AForgottenOpIsNeverTold) {
  World w(2, settings());
  std::vector<uint8_t> in(32, 0), again(32, 0);
  TestOp forgotten, sent, later, sent_later;
  w[1].recv(0, 9, bytes_of(in), &forgotten);
  w[1].forget(&forgotten);
  EXPECT_FALSE(w[1].cancel(&forgotten)) << "cancel found the forgotten op";
  const std::vector<uint8_t> out = test::pattern(32, 5);
  w[0].send(1, 9, bytes_of(out), &sent);
  ASSERT_TRUE(w.drive_until_finished({&sent}));
  w.drive_until([] { return false; }, 20ms);
  EXPECT_EQ(forgotten.calls(), 0) << "a forgotten op was told it finished";
  // The request lives on in UCX until its message came: the next one goes to a
  // new receive.
  w[0].send(1, 9, bytes_of(out), &sent_later);
  w[1].recv(0, 9, bytes_of(again), &later);
  ASSERT_TRUE(w.drive_until_finished({&sent_later, &later}));
  EXPECT_TRUE(again == out);
  EXPECT_EQ(forgotten.calls(), 0);
}

TEST_P(UcxPipe, WorldOfThreeMatchesEachSenderExactly) {
  World w(3, settings());
  // Every rank sends to every other with the same tag; receives name the sender.
  std::vector<std::vector<uint8_t>> in(9, std::vector<uint8_t>(1000));
  std::vector<std::vector<uint8_t>> out;
  for (int i = 0; i < 9; ++i) out.push_back(test::pattern(1000, static_cast<uint32_t>(100 + i)));
  std::vector<TestOp> ops(18);
  std::vector<const TestOp*> all;
  // Receives are posted from the highest sender down, messages sent from the
  // lowest up, each sender's delivered before the next sends: a receive that
  // matched on the tag alone would take another rank's message.
  for (int to = 0; to < 3; ++to) {
    for (int from = 2; from >= 0; --from) {
      if (from == to) continue;
      const size_t k = static_cast<size_t>(from * 3 + to);
      w[to].recv(from, 1, bytes_of(in[k]), &ops[2 * k]);
    }
  }
  for (int from = 0; from < 3; ++from) {
    std::vector<const TestOp*> sends;
    for (int to = 0; to < 3; ++to) {
      if (from == to) continue;
      const size_t k = static_cast<size_t>(from * 3 + to);
      w[from].send(to, 1, bytes_of(out[k]), &ops[2 * k + 1]);
      sends.push_back(&ops[2 * k + 1]);
      all.push_back(&ops[2 * k]);
      all.push_back(&ops[2 * k + 1]);
    }
    ASSERT_TRUE(w.drive_until_finished(sends));
    w.drive_until([] { return false; }, 10ms);
  }
  ASSERT_TRUE(w.drive_until_finished(all));
  for (int from = 0; from < 3; ++from) {
    for (int to = 0; to < 3; ++to) {
      if (from == to) continue;
      const size_t k = static_cast<size_t>(from * 3 + to);
      EXPECT_EQ(ops[2 * k].error(), nullptr) << test::what(ops[2 * k].error());
      EXPECT_TRUE(in[k] == out[k]) << "rank " << to << " got another rank's message as rank " << from << "'s";
    }
  }
}

// ---- sleeping ---------------------------------------------------------------------

TEST_P(UcxPipe, SleepEndsOnInterrupt) {
  World w(2, settings());
  ASSERT_TRUE(w.drive_until([&] { return w[0].arm(); }, 2s));
  std::thread waker([&] {
    std::this_thread::sleep_for(50ms);
    w[0].interrupt();
  });
  const auto start = net::Clock::now();
  w[0].sleep(test::in(5s), false);
  const auto slept = net::Clock::now() - start;
  waker.join();
  EXPECT_LT(slept, 2s) << "interrupt() did not end the sleep";
  // An interrupt before the sleep makes it return at once.
  w[0].interrupt();
  const auto again = net::Clock::now();
  w[0].sleep(test::in(5s), false);
  EXPECT_LT(net::Clock::now() - again, 1s);
}

TEST_P(UcxPipe, SleepEndsWhenAMessageArrives) {
  World w(2, settings());
  for (size_t size : {size_t{8}, size_t{4} << 20}) {
    const std::vector<uint8_t> out = test::pattern(size, 1);
    std::vector<uint8_t> in(size);
    TestOp received, sent;
    w[1].recv(0, 2, bytes_of(in), &received);
    std::thread sender([&] {
      std::this_thread::sleep_for(50ms);
      w[0].send(1, 2, bytes_of(out), &sent);
      wait_sleeping(w[0], sent);
    });
    const auto start = net::Clock::now();
    const bool ok = wait_sleeping(w[1], received, 5s);
    const auto took = net::Clock::now() - start;
    sender.join();
    ASSERT_TRUE(ok) << size << " bytes never woke the sleeping receiver";
    EXPECT_LT(took, 3s) << size;
    EXPECT_TRUE(in == out) << size;
  }
}

TEST_P(UcxPipe, SleepKeepsItsDeadlineAndBurnsNoCpu) {
  World w(2, settings());
  TestOp never;
  std::vector<uint8_t> in(8);
  w[1].recv(0, 3, bytes_of(in), &never);  // something pending, as in real use
  ASSERT_TRUE(w.drive_until([&] { return w[1].arm(); }, 2s));
  const auto cpu_before = pipe_cpu_time();
  const auto start = net::Clock::now();
  const auto deadline = test::in(200ms);
  int sleeps = 0, rounds = 0;
  while (net::Clock::now() < deadline) {
    ++rounds;
    if (w[1].progress() > 0) continue;
    if (w[1].arm()) {
      ++sleeps;
      w[1].sleep(deadline, true);
    }
  }
  const auto wall = net::Clock::now() - start;
  const auto cpu = pipe_cpu_time() - cpu_before;
  EXPECT_GE(wall, 195ms);
  EXPECT_LT(wall, 1s);
  EXPECT_LT(cpu, 50ms) << "sleeping 200 ms cost " << std::chrono::duration_cast<std::chrono::milliseconds>(cpu).count()
                       << " ms of CPU (" << rounds << " rounds, " << sleeps << " sleeps)";
  EXPECT_FALSE(never.finished());
  EXPECT_TRUE(w[1].cancel(&never));
}

// ---- lost peers -------------------------------------------------------------------

TEST_P(UcxPipe, DestroyedPeerFailsPendingAndLaterOpsWithPeerLost) {
  World w(2, settings());
  std::vector<uint8_t> in(64);
  TestOp pending;
  w[0].recv(1, 1, bytes_of(in), &pending);
  // A message that arrived before the peer went can still be taken afterwards.
  const std::vector<uint8_t> parting = test::pattern(64, 8);
  TestOp parting_sent;
  w[1].send(0, 2, bytes_of(parting), &parting_sent);
  ASSERT_TRUE(w.drive_until_finished({&parting_sent}));
  w.drive_until([] { return false; }, 20ms);

  // Rank 1's destructor drives its own worker: from here on only rank 0's is driven here.
  std::thread closer([&] { w.at(1).reset(); });
  const auto start = net::Clock::now();
  const bool failed = wait_sleeping(w[0], pending, 5s);
  closer.join();
  ASSERT_TRUE(failed) << "the receive from the destroyed rank is still pending";
  EXPECT_LT(net::Clock::now() - start, 4s);
  ErrorContext context;
  std::string message;
  EXPECT_TRUE(test::holds<PeerLost>(pending.error(), &message, &context)) << test::what(pending.error());
  EXPECT_EQ(context.peer, 1);
  EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
  EXPECT_TRUE(test::holds<PeerLost>(w[0].peer_error(1)));
  EXPECT_EQ(w[0].peer_error(0), nullptr);

  std::vector<uint8_t> kept(64);
  TestOp late_send, late_recv, kept_recv;
  w[0].send(1, 1, bytes_of(in), &late_send);
  w[0].recv(1, 1, bytes_of(in), &late_recv);
  w[0].recv(1, 2, bytes_of(kept), &kept_recv);
  ASSERT_TRUE(w.drive_until_finished({&late_send, &late_recv, &kept_recv}, 1s));  // rank 1 is gone: skipped
  EXPECT_TRUE(test::holds<PeerLost>(late_send.error())) << test::what(late_send.error());
  EXPECT_TRUE(test::holds<PeerLost>(late_recv.error())) << test::what(late_recv.error());
  EXPECT_EQ(kept_recv.error(), nullptr) << test::what(kept_recv.error());
  EXPECT_TRUE(kept == parting);
}

TEST_P(UcxPipe, WorldOfThreeGoesOnWhenOneRankGoes) {
  World w(3, settings());
  std::vector<uint8_t> from_two_0(16), from_two_1(16);
  TestOp wait_0, wait_1;
  w[0].recv(2, 1, bytes_of(from_two_0), &wait_0);
  w[1].recv(2, 1, bytes_of(from_two_1), &wait_1);
  std::thread closer([&] { w.at(2).reset(); });
  const bool failed = w.drive_until_finished({&wait_0, &wait_1}, 5s, {0, 1});
  closer.join();
  ASSERT_TRUE(failed);
  EXPECT_TRUE(test::holds<PeerLost>(wait_0.error())) << test::what(wait_0.error());
  EXPECT_TRUE(test::holds<PeerLost>(wait_1.error())) << test::what(wait_1.error());
  EXPECT_EQ(w[0].peer_error(1), nullptr);
  EXPECT_EQ(w[1].peer_error(0), nullptr);
  const std::vector<uint8_t> out = test::pattern(size_t{1} << 20, 2);
  std::vector<uint8_t> in(out.size());
  TestOp sent, received;
  w[1].recv(0, 1, bytes_of(in), &received);
  w[0].send(1, 1, bytes_of(out), &sent);
  ASSERT_TRUE(w.drive_until_finished({&sent, &received}));
  EXPECT_EQ(received.error(), nullptr) << test::what(received.error());
  EXPECT_TRUE(in == out);
  EXPECT_EQ(wait_0.calls(), 1);
  EXPECT_EQ(sent.calls(), 1);
}

TEST_P(UcxPipe, DestroyingAPipeWithPendingOpsTellsNoOneAndReturnsPromptly) {
  World w(2, settings());
  std::vector<uint8_t> in(64);
  const std::vector<uint8_t> big = test::pattern(size_t{8} << 20, 1);
  TestOp pending_recv, stuck_send;
  w[0].recv(1, 1, bytes_of(in), &pending_recv);
  w[0].send(1, 2, bytes_of(big), &stuck_send);  // rank 1 never receives it
  w.drive_until([] { return false; }, 20ms);
  const auto start = net::Clock::now();
  w.at(0).reset();
  EXPECT_LT(net::Clock::now() - start, 1500ms);
  EXPECT_EQ(pending_recv.calls(), 0);
  EXPECT_EQ(stuck_send.calls(), 0);
}

// ---- a peer process that dies -----------------------------------------------------

// The peer side of UcxKilledPeerProcess: this binary run again with the variables
// below holds rank 1 of a two-rank world until it is killed (or 20 s pass).
constexpr const char* kChildStoreVar = "THD_UCX_TEST_PEER_STORE";
constexpr const char* kChildTransportsVar = "THD_UCX_TEST_PEER_TRANSPORTS";

const Transports& transports_named(const std::string& name) { return name == kShm.name ? kShm : kTcp; }

TEST(UcxPipePeerProcess, HoldsRankOneUntilKilled) {
  const char* store_path = std::getenv(kChildStoreVar);
  const char* transports = std::getenv(kChildTransportsVar);
  if (store_path == nullptr || transports == nullptr) GTEST_SKIP() << "run by UcxKilledPeerProcess only";
  auto store = std::make_shared<FileStore>(store_path, -1, test::kLong);
  PipePtr pipe = make_pipe(options_for(store, 1, 2), settings_for(transports_named(transports)));
  TestOp never;
  std::vector<uint8_t> in(8);
  pipe->recv(0, 1, bytes_of(in), &never);
  wait_sleeping(*pipe, never, 20s);
}

class UcxKilledPeerProcess : public UcxPipe {};

TEST_P(UcxKilledPeerProcess, FailsThePendingReceiveWithPeerLost) {
  test::TempDir dir;
  const std::string store_path = dir.file("store");
  // Everything the child needs is built before fork: it only execs.
  std::vector<std::string> args = {"/proc/self/exe", "--gtest_filter=UcxPipePeerProcess.HoldsRankOneUntilKilled"};
  std::vector<std::string> env = {std::string(kChildStoreVar) + "=" + store_path,
                                  std::string(kChildTransportsVar) + "=" + GetParam().name};
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string self_exe(4096, '\0');
  self_exe.resize(
      static_cast<size_t>(std::max<ssize_t>(0, ::readlink("/proc/self/exe", self_exe.data(), self_exe.size()))));
  ASSERT_FALSE(self_exe.empty());

  test::Children children;
  const pid_t child = children.spawn([&] {
    ::execve(self_exe.c_str(), argv.data(), envp.data());
    return 97;
  });
  auto store = std::make_shared<FileStore>(store_path, -1, test::kLong);
  PipeSettings fast_keepalive = settings();
  // UCX checks shared-memory peers every KEEPALIVE_INTERVAL (20 s by default).
  fast_keepalive.ucx_config.emplace_back("KEEPALIVE_INTERVAL", "100ms");
  PipePtr pipe = make_pipe(options_for(store, 0, 2), fast_keepalive);
  std::vector<uint8_t> in(8);
  TestOp pending;
  pipe->recv(1, 1, bytes_of(in), &pending);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  children.wait_all();  // a zombie still counts as alive to UCX's shared-memory check
  const auto start = net::Clock::now();
  ASSERT_TRUE(wait_sleeping(*pipe, pending, 5s)) << "the killed peer was not noticed within 5 s";
  EXPECT_LT(net::Clock::now() - start, 4s);
  ErrorContext context;
  std::string message;
  EXPECT_TRUE(test::holds<PeerLost>(pending.error(), &message, &context)) << test::what(pending.error());
  EXPECT_EQ(context.peer, 1);
  EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
  EXPECT_TRUE(test::holds<PeerLost>(pipe->peer_error(1)));
  TestOp late;
  pipe->send(1, 1, bytes_of(in), &late);
  ASSERT_TRUE(wait_sleeping(*pipe, late, 1s));
  EXPECT_TRUE(test::holds<PeerLost>(late.error())) << test::what(late.error());
}

// ---- set-up -----------------------------------------------------------------------

TEST(UcxPipeSetUp, WorldOfOneNeedsNoPeers) {
  auto store = std::make_shared<HashStore>(test::kLong);
  PipePtr pipe = make_pipe(options_for(store, 0, 1), settings_for(kShm));
  EXPECT_EQ(pipe->name(), "ucx");
  EXPECT_EQ(pipe->rank(), 0);
  EXPECT_EQ(pipe->size(), 1);
  EXPECT_EQ(pipe->progress(), 0);
  EXPECT_EQ(pipe->peer_error(0), nullptr);
  TestOp op;
  std::vector<uint8_t> data(4);
  THD_EXPECT_THROW_MSG(pipe->send(0, 1, bytes_of(data), &op), ValueError, "peer 0");
  THD_EXPECT_THROW_MSG(pipe->recv(3, 1, bytes_of(data), &op), ValueError, "peer 3");
}

TEST(UcxPipeSetUp, BadOptionsAreValueErrors) {
  auto store = std::make_shared<HashStore>(test::kLong);
  THD_EXPECT_THROW_MSG(make_pipe(options_for(nullptr, 0, 2)), ValueError, "store is required");
  THD_EXPECT_THROW_MSG(make_pipe(options_for(store, 2, 2)), ValueError, "rank 2 is out of range");
  THD_EXPECT_THROW_MSG(make_pipe(options_for(store, -1, 2)), ValueError, "rank -1 is out of range");
  THD_EXPECT_THROW_MSG(make_pipe(options_for(store, 0, 0)), ValueError, "world_size");
  THD_EXPECT_THROW_MSG(make_pipe(options_for(store, 0, 2, 0ms)), ValueError, "timeout must be positive");
  PipeSettings unparsable;
  unparsable.ucx_config = {{"RNDV_THRESH", "not-a-size"}};
  THD_EXPECT_THROW_MSG(make_pipe(options_for(store, 0, 1), unparsable), ValueError, "RNDV_THRESH=not-a-size");
}

TEST(UcxPipeSetUp, TransportThatDoesNotExistIsAConnectionErrorWithAHint) {
  auto store = std::make_shared<HashStore>(test::kLong);
  PipeSettings bogus;
  bogus.ucx_config = {{"TLS", "no_such_transport"}};
  THD_EXPECT_THROW_MSG(make_pipe(options_for(store, 0, 1), bogus), ConnectionError, "UCX_TLS=tcp,self");
}

TEST(UcxPipeSetUp, MissingRankTimesOutNamingIt) {
  auto store = std::make_shared<HashStore>(test::kLong);
  try {
    make_pipe(options_for(store, 0, 3, test::kShort), settings_for(kShm));
    ADD_FAILURE() << "set-up without ranks 1 and 2 succeeded";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks 1, 2"), std::string::npos) << e.what();
  }
  // One rank missing: the error's peer is that rank.
  auto store2 = std::make_shared<HashStore>(test::kLong);
  std::vector<PipePtr> pipes(2);
  auto errors = test::run_rank_threads(2, [&](int r) {
    pipes[static_cast<size_t>(r)] = make_pipe(options_for(store2, r, 3, 500ms), settings_for(kShm));
  });
  for (int r = 0; r < 2; ++r) {
    ErrorContext context;
    std::string message;
    EXPECT_TRUE(test::holds<TimeoutError>(errors[static_cast<size_t>(r)], &message, &context))
        << test::what(errors[static_cast<size_t>(r)]);
    EXPECT_EQ(context.peer, 2);
    EXPECT_NE(message.find("rank 2"), std::string::npos) << message;
  }
}

std::string transports_name(const ::testing::TestParamInfo<Transports>& info) { return info.param.name; }
// ---- messages matched by UCX itself (send_tagged, recv_tagged, probe_tagged) ---------

detail::ucx::UcxMessagePipe& ucx_pipe(World& w, int r) { return static_cast<detail::ucx::UcxMessagePipe&>(w[r]); }

detail::Envelope native_envelope(int64_t tag, uint8_t dtype = detail::kRawBytes) {
  detail::Envelope e;
  e.context = detail::p2p_context(1);
  e.tag = tag;
  e.kind.dtype = dtype;
  return e;
}

ucp_tag_t native_tag_of(int64_t tag, int sender, uint8_t dtype = detail::kRawBytes) {
  return *detail::ucx::native_tag(native_envelope(tag, dtype), sender);
}

TEST_P(UcxPipe, TaggedReceivesMatchTheirSenderOrAnyAndLearnTheSendersTag) {
  World w(3, settings());
  const auto f32 = static_cast<uint8_t>(DType::Float32);
  // Rank 2's message waits for the receive from rank 2, though the one from rank
  // 0 is posted first and rank 0's message comes later.
  const std::vector<uint8_t> from0 = test::pattern(40, 1), from2 = test::pattern(24, 2);
  std::vector<uint8_t> in0(64), in2(64);
  ucp_tag_t tag0 = 0, tag2 = 0;
  TestOp r0, r2, s0, s2;
  const auto want0 = detail::ucx::native_match(native_envelope(5), 0);
  const auto want2 = detail::ucx::native_match(native_envelope(5), 2);
  ucx_pipe(w, 1).recv_tagged(0, want0.tag, want0.mask, bytes_of(in0), &tag0, &r0);
  ucx_pipe(w, 2).send_tagged(1, native_tag_of(5, 2, f32), bytes_of(from2), &s2);
  ASSERT_TRUE(w.drive_until_finished({&s2}));
  w.drive_until([] { return false; }, 20ms);
  EXPECT_FALSE(r0.finished());
  ucx_pipe(w, 1).recv_tagged(2, want2.tag, want2.mask, bytes_of(in2), &tag2, &r2);
  ucx_pipe(w, 0).send_tagged(1, native_tag_of(5, 0), bytes_of(from0), &s0);
  ASSERT_TRUE(w.drive_until_finished({&r0, &r2, &s0}));
  ASSERT_EQ(r0.error(), nullptr) << test::what(r0.error());
  ASSERT_EQ(r2.error(), nullptr) << test::what(r2.error());
  EXPECT_EQ(r0.bytes(), 40u);
  EXPECT_EQ(r2.bytes(), 24u);
  EXPECT_TRUE(std::equal(from0.begin(), from0.end(), in0.begin()));
  EXPECT_TRUE(std::equal(from2.begin(), from2.end(), in2.begin()));
  EXPECT_EQ(detail::ucx::unpack_native(tag0).sender, 0);
  EXPECT_EQ(detail::ucx::unpack_native(tag0).dtype, detail::ucx::kNativeRawBytes);
  EXPECT_EQ(detail::ucx::unpack_native(tag2).sender, 2);
  EXPECT_EQ(detail::ucx::unpack_native(tag2).dtype, static_cast<uint32_t>(DType::Float32));

  // From any rank, in each sender's order, eager and rendezvous sizes alike; a
  // pipe message on the same peer is not taken.
  const auto any = detail::ucx::native_match(native_envelope(6), kAnySource);
  const std::vector<uint8_t> first = test::pattern(1 << 20, 3), second = test::pattern(8, 4);
  const std::vector<uint8_t> pipe_message = test::pattern(8, 5);
  TestOp s_first, s_second, s_pipe;
  w[0].send(1, 6, bytes_of(pipe_message), &s_pipe);
  ucx_pipe(w, 0).send_tagged(1, native_tag_of(6, 0), bytes_of(first), &s_first);
  ucx_pipe(w, 0).send_tagged(1, native_tag_of(6, 0), bytes_of(second), &s_second);
  std::vector<uint8_t> a(1 << 20), b(1 << 20);
  ucp_tag_t tag_a = 0, tag_b = 0;
  TestOp ra, rb;
  ucx_pipe(w, 1).recv_tagged(-1, any.tag, any.mask, bytes_of(a), &tag_a, &ra);
  ucx_pipe(w, 1).recv_tagged(-1, any.tag, any.mask, bytes_of(b), &tag_b, &rb);
  ASSERT_TRUE(w.drive_until_finished({&ra, &rb, &s_first, &s_second}));
  EXPECT_EQ(ra.bytes(), first.size());
  EXPECT_EQ(rb.bytes(), second.size());
  EXPECT_TRUE(a == first);
  EXPECT_TRUE(std::equal(second.begin(), second.end(), b.begin()));
  EXPECT_EQ(detail::ucx::unpack_native(tag_a).sender, 0);
  std::vector<uint8_t> piped(8);
  TestOp r_pipe;
  w[1].recv(0, 6, bytes_of(piped), &r_pipe);
  ASSERT_TRUE(w.drive_until_finished({&r_pipe, &s_pipe}));
  EXPECT_TRUE(piped == pipe_message);
}

TEST_P(UcxPipe, ATaggedReceiveOfALongerMessageFailsNamingBothLengthsAndStillLearnsItsTag) {
  World w(2, settings());
  for (size_t sent_size : {size_t{100}, size_t{1} << 20}) {
    const size_t room = sent_size / 3;
    constexpr size_t kGuard = 4096;
    const std::vector<uint8_t> out = test::pattern(sent_size, 6);
    std::vector<uint8_t> in(room + kGuard, 0xab);
    const auto want = detail::ucx::native_match(native_envelope(7), 0);
    ucp_tag_t got = 0;
    TestOp sent, received;
    ucx_pipe(w, 1).recv_tagged(0, want.tag, want.mask, std::span<uint8_t>(in.data(), room), &got, &received);
    ucx_pipe(w, 0).send_tagged(1, native_tag_of(7, 0), bytes_of(out), &sent);
    ASSERT_TRUE(w.drive_until_finished({&sent, &received}));
    std::string message;
    EXPECT_TRUE(test::holds<ValueError>(received.error(), &message)) << test::what(received.error());
    EXPECT_NE(message.find(std::to_string(room)), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(sent_size)), std::string::npos) << message;
    EXPECT_EQ(got, native_tag_of(7, 0));
    for (size_t i = room; i < in.size(); ++i) ASSERT_EQ(in[i], 0xab) << "byte " << i << " was written";
  }
}

TEST_P(UcxPipe, ProbeTaggedSeesTheNextMessageAndLeavesIt) {
  World w(2, settings());
  const auto any = detail::ucx::native_match(native_envelope(8), kAnySource);
  EXPECT_FALSE(ucx_pipe(w, 1).probe_tagged(any.tag, any.mask).has_value());
  const std::vector<uint8_t> out = test::pattern(300, 7);
  TestOp sent;
  ucx_pipe(w, 0).send_tagged(1, native_tag_of(8, 0), bytes_of(out), &sent);
  ASSERT_TRUE(w.drive_until_finished({&sent}));
  std::optional<MessagePipe::Probed> seen;
  ASSERT_TRUE(w.drive_until([&] { return (seen = ucx_pipe(w, 1).probe_tagged(any.tag, any.mask)).has_value(); }));
  EXPECT_EQ(seen->length, out.size());
  EXPECT_EQ(seen->tag, native_tag_of(8, 0));
  // Still there: a receive of exactly its length takes it.
  std::vector<uint8_t> in(seen->length);
  ucp_tag_t got = 0;
  TestOp received;
  ucx_pipe(w, 1).recv_tagged(0, seen->tag, ~ucp_tag_t{0}, bytes_of(in), &got, &received);
  ASSERT_TRUE(w.drive_until_finished({&received}));
  EXPECT_EQ(received.error(), nullptr) << test::what(received.error());
  EXPECT_TRUE(in == out);
}

TEST_P(UcxPipe, ATaggedReceiveFromALostPeerFailsAndOneFromAnyRankIsLeftToItsCaller) {
  World w(2, settings());
  const auto from1 = detail::ucx::native_match(native_envelope(9), 1);
  const auto any = detail::ucx::native_match(native_envelope(9), kAnySource);
  std::vector<uint8_t> a(8), b(8);
  ucp_tag_t tag_a = 0, tag_b = 0;
  TestOp pending, pending_any;
  ucx_pipe(w, 0).recv_tagged(1, from1.tag, from1.mask, bytes_of(a), &tag_a, &pending);
  ucx_pipe(w, 0).recv_tagged(-1, any.tag, any.mask, bytes_of(b), &tag_b, &pending_any);
  std::thread closer([&] { w.at(1).reset(); });
  const bool failed = wait_sleeping(w[0], pending, 5s);
  closer.join();
  ASSERT_TRUE(failed) << "the tagged receive from the destroyed rank is still pending";
  EXPECT_TRUE(test::holds<PeerLost>(pending.error())) << test::what(pending.error());
  EXPECT_FALSE(pending_any.finished());
  EXPECT_TRUE(w[0].cancel(&pending_any));
}

// A tagged receive that ends without a message (its peer lost) has no sender's
// tag to report: UCX's info for it is whatever the request's memory last held (a
// message received before), which read as a tag names a stray sender and dtype.
TEST_P(UcxPipe, ATaggedReceiveEndedByItsPeersLossLeavesTheSendersTagAlone) {
  World w(2, settings());
  const auto from0 = detail::ucx::native_match(native_envelope(10), 0);
  const std::vector<uint8_t> out = test::pattern(16, 8);
  std::vector<uint8_t> in(16);
  for (int round = 0; round < 4; ++round) {
    ucp_tag_t got = 0;
    TestOp sent, received;
    ucx_pipe(w, 1).recv_tagged(0, from0.tag, from0.mask, bytes_of(in), &got, &received);
    ucx_pipe(w, 0).send_tagged(1, native_tag_of(10, 0, static_cast<uint8_t>(DType::Int64)), bytes_of(out), &sent);
    ASSERT_TRUE(w.drive_until_finished({&sent, &received}));
    ASSERT_EQ(received.error(), nullptr) << test::what(received.error());
  }
  constexpr ucp_tag_t kUntouched = 0x0123456789abcdefULL;
  ucp_tag_t got = kUntouched;
  TestOp pending;
  ucx_pipe(w, 1).recv_tagged(0, from0.tag, from0.mask, bytes_of(in), &got, &pending);
  ucx_pipe(w, 1).peer_lost(0, "the test says so");
  ASSERT_TRUE(w.drive_until_finished({&pending}));
  EXPECT_TRUE(test::holds<PeerLost>(pending.error())) << test::what(pending.error());
  EXPECT_EQ(got, kUntouched);
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxPipe, ::testing::Values(kShm, kTcp), transports_name);
INSTANTIATE_TEST_SUITE_P(Transports, UcxKilledPeerProcess, ::testing::Values(kShm, kTcp), transports_name);

}  // namespace
}  // namespace thd
