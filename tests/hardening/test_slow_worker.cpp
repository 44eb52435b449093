// Flow control and a worker that is slow, stalled or silent: a node that keeps
// finishing ops is waited for however long its queue takes; one that reports but
// finishes nothing, and one that sends nothing at all, fail the master's flow
// control at its timeout, each with an error that says which it is.
#include <gtest/gtest.h>

#include <signal.h>

#include <thread>

#include <thd/distributed.h>
#include <thd/stream.h>

#include "fault_checks.h"

namespace thd::test {
namespace {

using namespace std::chrono_literals;

constexpr milliseconds kTimeout{1000};
constexpr milliseconds kSlack{2000};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// One op per batch and a window of `ops`: the master waits for credits after a few
// ops, and each wait covers several of the node's ops.
JobOptions one_op_per_batch(int64_t ops) {
  JobOptions o{.workers = 1, .timeout = kTimeout, .test_hooks = true};
  o.master.max_ops_in_flight = ops;
  o.master.batch_bytes = 1;
  return o;
}

// Issues `ops` latch waits of `each` (never opened: each ends, failing, after
// `each`) on a side stream of node 0, and returns the time the master was held.
milliseconds issue_latch_waits(const Stream& on, int ops, milliseconds each) {
  StreamScope in(on);
  const auto start = Clock::now();
  for (int i = 0; i < ops; ++i) detail::test_latch_wait(/*key=*/1000 + static_cast<uint64_t>(i), each);
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
}

TEST(SlowWorker, ANodeThatKeepsFinishingOpsIsWaitedForPastTheTimeout) {
  WorkerJob job(one_op_per_batch(/*ops=*/8));
  DistributedTensor t = DistributedTensor::ones({4});
  Stream side = Stream::create(0);
  // 14 ops of 300 ms: the master waits for credits about 1.5 s at a time, longer
  // than its 1 s timeout, while the node finishes an op every 300 ms.
  const milliseconds held = issue_latch_waits(side, 14, 300ms);
  EXPECT_GE(held, 1500ms) << "flow control never held the master: the test proves nothing";
  report_timing("issuing 14 ops of 300 ms with a window of 8", held);
  // A get on the default stream comes after the side stream's ~2.4 s of work left:
  // the worker's default stream and the master both wait past the timeout.
  auto start = Clock::now();
  EXPECT_FLOAT_EQ(t.sum().item<float>(), 4.0f);
  const auto got_after = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  EXPECT_GE(got_after, kTimeout) << "the get was not behind the queue: the test proves nothing";
  report_timing("a get behind ~2.4 s of queued ops", got_after);
  // And synchronize() behind another 1.8 s raises what the latch waits reported.
  (void)issue_latch_waits(side, 6, 300ms);
  start = Clock::now();
  try {
    synchronize();
    ADD_FAILURE() << "the latch waits were never opened, yet none failed";
  } catch (const RemoteError& e) {
    EXPECT_TRUE(contains(e.what(), "latch")) << e.what();
  } catch (...) {
    ADD_FAILURE() << "expected the latch waits' RemoteError, got " << describe(std::current_exception());
  }
  const auto synced_after = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  EXPECT_GE(synced_after, kTimeout) << "synchronize() was not behind the queue: the test proves nothing";
  report_timing("synchronize behind ~1.8 s of queued ops", synced_after);
  // Each sync point raises one of the 20 failures; the rest are raised here.
  for (int i = 0; i < 20; ++i) {
    try {
      synchronize();
      break;
    } catch (const RemoteError&) {
    }
  }
  expect_clean_end(job, {});
}

TEST(SlowWorker, ANodeThatReportsButFinishesNothingFailsFlowControlSayingItIsAlive) {
  WorkerJob job(one_op_per_batch(/*ops=*/4));
  Stream side = Stream::create(0);
  const auto start = Clock::now();
  try {
    (void)issue_latch_waits(side, 12, 3000ms);  // the first alone outlasts the timeout
    ADD_FAILURE() << "12 ops of 3 s went out with a window of 4 and a 1 s timeout";
  } catch (const TimeoutError& e) {
    const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    report_timing("flow control on a stalled node", took);
    EXPECT_GE(took, kTimeout - 50ms);
    EXPECT_LE(took, kTimeout + kSlack);
    const std::string what = e.what();
    report_message("flow control on a stalled node", what);
    EXPECT_TRUE(contains(what, "node 0 is alive")) << what;
    EXPECT_TRUE(contains(what, "finished no op in")) << what;
  } catch (...) {
    ADD_FAILURE() << "expected a TimeoutError, got " << describe(std::current_exception());
  }
  (void)job.stop();
}

TEST(SlowWorker, ANodeThatSendsNothingFailsFlowControlSayingSo) {
  WorkerJob job(one_op_per_batch(/*ops=*/4));
  DistributedTensor t = DistributedTensor::ones({4});
  ASSERT_FLOAT_EQ(t.sum().item<float>(), 4.0f);
  // The node's last progress report (it finished the sum) is in before it stops.
  std::this_thread::sleep_for(400ms);
  job.signal(0, SIGSTOP);
  const auto stopped = Clock::now();
  try {
    for (int i = 0; i < 64; ++i) t.add_(1);
    ADD_FAILURE() << "64 ops went out to a stopped node with a window of 4";
  } catch (const TimeoutError& e) {
    const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - stopped);
    report_timing("flow control on a stopped node", took);
    EXPECT_LE(took, kTimeout + kSlack);
    const std::string what = e.what();
    report_message("flow control on a stopped node", what);
    EXPECT_TRUE(contains(what, "node 0 sent nothing in")) << what;
    EXPECT_TRUE(contains(what, "stopped")) << what;
  } catch (...) {
    ADD_FAILURE() << "expected a TimeoutError, got " << describe(std::current_exception());
  }
  job.signal(0, SIGCONT);
  (void)job.stop();
}

}  // namespace
}  // namespace thd::test
