// Streams and events across nodes (docs/streams.md): ops on one stream in issue
// order, streams of a node overlapping, event waits ordering streams on one node and
// across nodes (the owning worker tells the waiting one), failures carried through
// events, CUDA's rules for events never recorded, timing, and the default stream's
// legacy semantics.
#include <gtest/gtest.h>

#include <cstdio>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <thd/distributed.h>
#include <thd/stream.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

using namespace std::chrono_literals;

class Streams : public JobTest<2> {
 protected:
  static void SetUpTestSuite() {
    ::setenv("THD_TEST_HOOKS", "1", 1);  // the test latches; the workers started now inherit it
    JobTest<2>::SetUpTestSuite();
    ::unsetenv("THD_TEST_HOOKS");
  }
};

// Work that keeps a stream busy for a while (~0.1-0.3 s on the CI machine): a chain
// of dependent matmuls.
DistributedTensor busy_work(int steps = 6) {
  DistributedTensor a = DistributedTensor::ones({384, 384}, kFloat32);
  for (int i = 0; i < steps; ++i) a = a.matmul(a).mul_(1.0f / 384.0f);
  return a;
}

// Threads of a process, from /proc.
int threads_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

TEST_F(Streams, ANodeHasAtMostMaxStreamsPerNodeAndADroppedOneMakesRoom) {
  const int limit = MasterWorkerOptions{}.max_streams_per_node;
  std::vector<Stream> held;
  for (int i = 0; i < limit; ++i) held.push_back(Stream::create(1));
  try {
    (void)Stream::create(1);
    ADD_FAILURE() << "stream " << limit + 1 << " of node 1 was created";
  } catch (const ValueError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("max_streams_per_node"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(limit)), std::string::npos) << what;
  }
  EXPECT_NO_THROW((void)Stream::create(0)) << "another node's streams are counted apart";
  held.pop_back();
  held.push_back(Stream::create(1));
  {
    StreamScope in(held.back());
    EXPECT_TRUE(same_tensor((DistributedTensor::ones({4}) * 2.0f).get(), Tensor::full({4}, 2.0f)));
  }
  const int at_peak = threads_of(job().worker_pid(1));
  EXPECT_LE(at_peak, limit + 64) << "a stream is a thread of its node; the node's other threads are few";
  held.clear();
  // Thousands of streams over a session, a few at a time: their threads go with them.
  for (int i = 0; i < 2000; ++i) {
    Stream s = Stream::create(1);
    StreamScope in(s);
    DistributedTensor::ones({4}).add_(1.0f);
  }
  synchronize();
  (void)Stream::create(1);  // the node reaps the streams that finished their work
  const int after = threads_of(job().worker_pid(1));
  EXPECT_LT(after, 64);
  std::printf("[ figures  ] node 1 threads: %d with %d streams, %d after 2000 more created and dropped\n", at_peak,
              limit, after);
}

TEST_F(Streams, OpsOnOneStreamRunInIssueOrder) {
  Stream s = Stream::create(1);
  EXPECT_EQ(s.node(), 1);
  EXPECT_FALSE(s.is_default());
  StreamScope in(s);
  EXPECT_EQ(current_node(), 1);
  EXPECT_EQ(current_stream(), s);
  DistributedTensor x = DistributedTensor::zeros({8}, kInt64);
  int64_t expected = 0;
  for (int i = 0; i < 2000; ++i) {
    if (i % 2 == 0) {
      x.add_(i);
      expected += i;
    } else {
      x.mul_(-1);
      expected = -expected;
    }
  }
  EXPECT_EQ(x.node(), 1);
  EXPECT_TRUE(same_tensor(x.get(), Tensor::full({8}, expected, kInt64)));
}

TEST_F(Streams, ScopesNestAndRestoreTheNodeAndStream) {
  Stream s0 = Stream::create(0);
  Stream s1 = Stream::create(1, Stream::Priority::High);
  EXPECT_EQ(s1.priority(), Stream::Priority::High);
  EXPECT_TRUE(current_stream().is_default());
  {
    StreamScope a(s1);
    EXPECT_EQ(current_node(), 1);
    {
      StreamScope b(s0);
      EXPECT_EQ(current_node(), 0);
      EXPECT_EQ(current_stream(), s0);
      EXPECT_EQ(current_stream(1), s1);  // node 1's current stream is still s1
    }
    EXPECT_EQ(current_stream(), s1);
    EXPECT_TRUE(current_stream(0).is_default());
  }
  EXPECT_EQ(current_node(), 0);
  EXPECT_TRUE(current_stream().is_default());
  EXPECT_EQ(Stream::default_stream(1).node(), 1);
}

TEST_F(Streams, StreamsOfANodeOverlap) {
  Stream slow = Stream::create(0);
  Stream fast = Stream::create(0);
  DistributedTensor a;
  {
    StreamScope in(slow);
    detail::test_latch_wait(/*key=*/1002, std::chrono::seconds(20));  // held until we know
    a = busy_work(4);
  }
  Event done_fast;
  {
    StreamScope in(fast);
    DistributedTensor b = DistributedTensor::ones({4}) + 1;
    done_fast.record();
  }
  done_fast.synchronize();  // does not wait for `slow`
  EXPECT_FALSE(slow.query()) << "the fast stream waited for the slow one";
  {
    StreamScope in(fast);
    detail::test_latch_open(/*key=*/1002);
  }
  slow.synchronize();
  EXPECT_TRUE(slow.query());
  EXPECT_TRUE(same_tensor(a.get(), Tensor::ones({384, 384})));
}

TEST_F(Streams, AStreamRunsWhileAnotherIsBlockedOnWorkIssuedAfterIt) {
  // Without timing: stream A's op blocks until an op issued later on stream B has
  // run. One queue per node would never get to B's op: A's latch would time out and
  // its error would surface below.
  Stream a = Stream::create(0);
  Stream b = Stream::create(0);
  DistributedTensor after;
  {
    StreamScope in(a);
    detail::test_latch_wait(/*key=*/1001, std::chrono::seconds(20));
    after = DistributedTensor::ones({4}) * 5;
  }
  {
    StreamScope in(b);
    detail::test_latch_open(/*key=*/1001);
  }
  EXPECT_NO_THROW(a.synchronize());
  EXPECT_TRUE(same_tensor(after.get(), Tensor::full({4}, 5.0f)));
  // The same across the default stream is not possible: it waits for the others.
}

TEST_F(Streams, OneStreamWaitsForEventsOfManyStreams) {
  constexpr int kStreams = 8;
  std::vector<Stream> streams;
  std::vector<DistributedTensor> parts;
  std::vector<Event> done;
  Stream gather = Stream::create(1);
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(Stream::create(1));
    StreamScope in(streams.back());
    DistributedTensor p = DistributedTensor::zeros({256});
    for (int k = 0; k <= i; ++k) p.add_(1);  // part i holds i + 1
    parts.push_back(p);
    done.push_back(streams.back().record());
  }
  for (const Event& e : done) gather.wait(e);
  DistributedTensor total;
  {
    StreamScope in(gather);
    total = DistributedTensor::zeros({256});
    for (const DistributedTensor& p : parts) total.add_(p);
  }
  EXPECT_TRUE(same_tensor(total.get(), Tensor::full({256}, kStreams * (kStreams + 1) / 2.0f)));
  for (Stream& s : streams) EXPECT_TRUE(s.query());
}

TEST_F(Streams, AnEventWaitOrdersTwoStreamsOfANode) {
  Stream producer = Stream::create(0);
  Stream consumer = Stream::create(0);
  DistributedTensor x = DistributedTensor::zeros({1 << 16});
  synchronize();
  Event written;
  {
    StreamScope in(producer);
    DistributedTensor w = busy_work(4);  // the write comes late
    x.add_(w.sum());                     // 384*384/384... = 1 each step: sum = 147456
    written.record();
  }
  consumer.wait(written);
  DistributedTensor y;
  {
    StreamScope in(consumer);
    y = x * 2;
  }
  EXPECT_TRUE(same_tensor(y.get(), Tensor::full({1 << 16}, 2.0f * 384 * 384)));
}

TEST_F(Streams, AStreamWaitsForAnEventOfAnotherNode) {
  Stream on0 = Stream::create(0);
  Stream on1 = Stream::create(1);
  Event first;
  {
    StreamScope in(on0);
    DistributedTensor w = busy_work(10);
    first.record();
  }
  on1.wait(first);  // node 0 tells node 1 directly when `first` has run
  Event second = on1.record();
  second.synchronize();
  // `second` ran after `first` did: node 1's stream waited for it.
  EXPECT_TRUE(first.query());
  EXPECT_EQ(first.node(), 0);
  EXPECT_EQ(second.node(), 1);
}

// The master may destroy a stream (its last handle going) the moment another
// node's stream has gone on past one of its records, while the record's own task
// is still finishing on the destroyed stream: the record must neither fail nor
// lose its callbacks (it once looked its stream up among the live ones).
TEST_F(Streams, AStreamDestroyedJustAfterARecordOthersWaitedOnLeavesNoError) {
  for (int i = 0; i < 30; ++i) {
    Stream on0 = Stream::create(0);
    Stream on1 = Stream::create(1);
    Event first = on0.record();
    on1.wait(first);
    Event second = on1.record();
    second.synchronize();
  }  // on0 and on1 destroyed each round
  EXPECT_NO_THROW(synchronize());
}

TEST_F(Streams, AFailureReachesTheStreamsThatWaitOnIt) {
  const Tensor data = Tensor::arange(0, 12, 1, kFloat32).view({4, 3});
  const Tensor bad_index = Tensor::arange(8, 10, 1, kInt64);  // out of range for 4 rows
  for (int waiter_node : {0, 1}) {
    SCOPED_TRACE("waiting on node " + std::to_string(waiter_node));
    Stream failing = Stream::create(0);
    Stream waiting = Stream::create(waiter_node);
    Event after_failure;
    {
      StreamScope in(failing);
      DistributedTensor bad = data.dist_send(0).index_select(0, bad_index.dist_send(0));
      after_failure.record();
    }
    waiting.wait(after_failure);
    DistributedTensor unrelated;
    {
      StreamScope in(waiting);
      unrelated = DistributedTensor::ones({3}) * 2;  // reads nothing that failed
    }
    try {
      unrelated.get();
      ADD_FAILURE() << "a stream that waited on a failed event ran on";
    } catch (const RemoteError& e) {
      EXPECT_EQ(e.context().op, "index_select") << e.what();
      EXPECT_EQ(e.context().node, 0) << e.what();
    }
    // The event itself raises it too; a synchronize() clears the streams.
    EXPECT_THROW(after_failure.synchronize(), RemoteError);
    EXPECT_NO_THROW(synchronize());
    StreamScope in(waiting);
    EXPECT_TRUE(same_tensor((DistributedTensor::ones({3}) * 2).get(), Tensor::full({3}, 2.0f)));
  }
}

TEST_F(Streams, EventsNeverRecordedAreCompleteAndWaitingOnThemIsANoOp) {
  Event never;
  EXPECT_TRUE(never.query());
  EXPECT_FALSE(never.node().has_value());
  never.synchronize();
  Stream s = Stream::create(1);
  s.wait(never);
  StreamScope in(s);
  EXPECT_TRUE(same_tensor((DistributedTensor::ones({2}) + 1).get(), Tensor::full({2}, 2.0f)));
}

TEST_F(Streams, AnEventDestroyedWhileAStreamWaitsOnItStaysValid) {
  Stream producer = Stream::create(1);
  Stream consumer = Stream::create(1);
  DistributedTensor x;
  {
    NodeScope on(1);
    x = DistributedTensor::zeros({4});
  }
  {
    Event e;
    {
      StreamScope in(producer);
      DistributedTensor w = busy_work(4);
      x.add_(w.sum());
      e.record();
    }
    consumer.wait(e);
  }  // e's last handle goes: the node forgets it, the wait holds it
  DistributedTensor y;
  {
    StreamScope in(consumer);
    y = x + 1;
  }
  EXPECT_TRUE(same_tensor(y.get(), Tensor::full({4}, 384.0f * 384 + 1)));
}

TEST_F(Streams, TimedEventsMeasureTheWorkBetweenThem) {
  Stream s = Stream::create(0);
  Event start(/*enable_timing=*/true);
  Event end(/*enable_timing=*/true);
  EXPECT_TRUE(start.timing());
  {
    StreamScope in(s);
    start.record();
    DistributedTensor w = busy_work(4);
    end.record();
  }
  end.synchronize();
  const float ms = start.elapsed_time(end);
  EXPECT_GT(ms, 0.0f);
  EXPECT_LT(ms, 30000.0f);
  Event untimed = s.record();
  untimed.synchronize();
  EXPECT_THROW(start.elapsed_time(untimed), ValueError);
  Event elsewhere(true);
  elsewhere.record(Stream::default_stream(1));
  elsewhere.synchronize();
  EXPECT_THROW(start.elapsed_time(elsewhere), ValueError);
  EXPECT_THROW(elsewhere.record(s), ValueError);  // an event belongs to one node
}

TEST_F(Streams, TheDefaultStreamWaitsForTheOthers) {
  // CUDA's legacy default stream: an op issued on it runs after everything issued
  // before on the node's other streams.
  Stream s = Stream::create(0);
  DistributedTensor x = DistributedTensor::zeros({1 << 16});
  synchronize();
  {
    StreamScope in(s);
    DistributedTensor w = busy_work(4);
    x.add_(w.sum());
  }
  DistributedTensor y = x + 1;  // the default stream
  EXPECT_TRUE(same_tensor(y.get(), Tensor::full({1 << 16}, 384.0f * 384 + 1)));
}

TEST_F(Streams, TensorsFreedWhileAStreamStillUsesThemGoAfterwards) {
  const auto baseline = (synchronize(), thd::detail::live_tensors_per_node());
  Stream s = Stream::create(0);
  DistributedTensor z;
  {
    StreamScope in(s);
    DistributedTensor w = busy_work(4);
    DistributedTensor tmp = w + 1;
    z = tmp.sum();
  }  // w, tmp released now: their frees wait for the stream
  EXPECT_TRUE(same_tensor(z.get(), Tensor::full({}, 2.0f * 384 * 384)));
  synchronize();
  auto expected = baseline;
  expected[0] += 1;  // z
  EXPECT_EQ(thd::detail::live_tensors_per_node(), expected);
}

TEST_F(Streams, CollectivesOnStreamsOfEveryNode) {
  Stream s0 = Stream::create(0);
  Stream s1 = Stream::create(1);
  std::vector<DistributedTensor> t;
  {
    StreamScope a(s0);
    t.push_back(DistributedTensor::full({64}, 1.0));
  }
  {
    StreamScope b(s1);
    t.push_back(DistributedTensor::full({64}, 2.0));
  }
  {
    StreamScope a(s0);
    StreamScope b(s1);
    all_reduce(t, ReduceOp::Sum);
    all_reduce(t, ReduceOp::Max);
  }
  EXPECT_TRUE(same_tensor(t[0].get(), Tensor::full({64}, 3.0f)));
  EXPECT_TRUE(same_tensor(t[1].get(), Tensor::full({64}, 3.0f)));
}

// Nodes on one host: node 0 holds each event notice's message until a latch
// opens (the suite's own), so only the notice board's doorbell
// (worker/notice_board.h) can end node 1's wait before then.
template <uint64_t HoldLatch>
class HeldEventNoticesJob : public JobTest<2> {
 protected:
  static constexpr uint64_t kHoldLatch = HoldLatch;
  static void SetUpTestSuite() {
    ::setenv("THD_TEST_HOOKS", "1", 1);
    ::setenv("THD_TEST_HOLD_EVENT_NOTICES", std::to_string(HoldLatch).c_str(), 1);
    JobTest<2>::SetUpTestSuite();
    ::unsetenv("THD_TEST_HOOKS");
    ::unsetenv("THD_TEST_HOLD_EVENT_NOTICES");
  }
};
// The record comes at once: node 1's stream is most likely polling its board.
using HeldEventNotices = HeldEventNoticesJob<1101>;
// The record comes well after node 1's stream has stopped polling and sleeps on
// its board.
using HeldEventNoticesAsleep = HeldEventNoticesJob<1103>;

// True once `e` has run, false if it has not within `limit`.
bool completes_within(const Event& e, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!e.query()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Node 1's stream waits for an event of node 0 recorded `delay` after the wait is
// in place, then adds 1 to the zeros it returns (on node 1); node 0 holds the
// notice's message until latch `hold`.
DistributedTensor a_wait_ended_by_the_bell(std::chrono::milliseconds delay, uint64_t hold) {
  DistributedTensor x;
  {
    NodeScope on(1);
    x = DistributedTensor::zeros({4});
  }
  constexpr uint64_t kRecordLatch = 1102;  // opened each time: reused
  Stream on0 = Stream::create(0);
  Stream opener = Stream::create(0);
  Stream on1 = Stream::create(1);
  Event first;
  {
    // The record runs only after node 0 has the notify (issued below), so the
    // notice goes from on0's executor, which the hold then blocks (not node 0's
    // command loop, which must go on to read the latches' opening).
    StreamScope in(on0);
    detail::test_latch_wait(kRecordLatch + hold, std::chrono::seconds(20));
    first.record();
  }
  on1.wait(first);
  Event second;
  {
    StreamScope in(on1);
    x.add_(1);
    second.record();
  }
  (void)on1.query();  // node 1 has the wait
  std::this_thread::sleep_for(delay);
  {
    StreamScope in(opener);
    detail::test_latch_open(kRecordLatch + hold);
  }
  const bool went_on = completes_within(second, std::chrono::seconds(15));
  {
    StreamScope in(opener);
    detail::test_latch_open(hold);  // the held notices go now, whatever happened
  }
  EXPECT_TRUE(went_on) << "node 1's stream waited for the notice message, not the doorbell";
  synchronize();
  return x;
}

TEST_F(HeldEventNotices, AStreamOnTheSameHostGoesOnAtTheDoorbellBeforeTheNoticeMessage) {
  DistributedTensor x = a_wait_ended_by_the_bell(0ms, kHoldLatch);
  EXPECT_TRUE(same_tensor(x.get(), Tensor::full({4}, 1.0f)));

  // The notice messages that came late were taken off the channel: further waits
  // across the nodes, and a failure carried through one, still work.
  Stream on0 = Stream::create(0);
  Stream on1 = Stream::create(1);
  for (int i = 0; i < 20; ++i) {
    Event e;
    {
      StreamScope in(on0);
      e.record();
    }
    on1.wait(e);
    StreamScope in(on1);
    x.add_(1);
  }
  EXPECT_TRUE(same_tensor(x.get(), Tensor::full({4}, 21.0f)));
  Event after_failure;
  {
    StreamScope in(on0);
    DistributedTensor bad = DistributedTensor::zeros({4}).index_select(0, DistributedTensor::full({1}, 9, kInt64));
    after_failure.record();
  }
  on1.wait(after_failure);
  DistributedTensor unrelated;
  {
    StreamScope in(on1);
    unrelated = DistributedTensor::ones({3}) * 2;
  }
  EXPECT_THROW(unrelated.get(), RemoteError) << "a failure on node 0 did not reach node 1's waiting stream";
  EXPECT_THROW(after_failure.synchronize(), RemoteError);
  EXPECT_NO_THROW(synchronize());
}

TEST_F(HeldEventNoticesAsleep, AStreamAsleepOnItsBoardIsWokenByTheDoorbell) {
  // Past the 1 ms a waiting stream polls (ops_stream.cpp, kRemoteEventYieldSpin).
  DistributedTensor x = a_wait_ended_by_the_bell(50ms, kHoldLatch);
  EXPECT_TRUE(same_tensor(x.get(), Tensor::full({4}, 1.0f)));
}

}  // namespace
}  // namespace thd::test
