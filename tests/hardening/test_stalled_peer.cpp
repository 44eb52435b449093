// A stalled peer — a worker stopped with SIGSTOP: its connections stay open and
// its kernel keeps acknowledging bytes, so nothing looks lost — is caught by the
// timeout of whoever waits for it, with an error that names it and the timeout;
// and once it runs again (or is killed) the job ends without hanging.
#include <gtest/gtest.h>

#include <signal.h>

#include <thd/distributed.h>
#include <thd/stream.h>

#include "fault_checks.h"

namespace thd::test {
namespace {

using namespace std::chrono_literals;

constexpr milliseconds kTimeout{1500};
// How late past its timeout a wait may end (a loaded machine).
constexpr milliseconds kSlack{2000};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(StalledPeer, MasterWaitingOnAStoppedWorkerTimesOutNamingIt) {
  WorkerJob job({.timeout = kTimeout});
  DistributedTensor t;
  {
    NodeScope on(1);
    t = DistributedTensor::ones({4});
  }
  ASSERT_FLOAT_EQ(t.sum().item<float>(), 4.0f);
  job.signal(1, SIGSTOP);
  const auto stopped = Clock::now();
  try {
    (t + 1).get();
    ADD_FAILURE() << "get() from a stopped worker returned";
  } catch (const TimeoutError& e) {
    const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - stopped);
    report_timing("get from the stopped worker", took);
    EXPECT_GE(took, kTimeout - 50ms);
    EXPECT_LE(took, kTimeout + kSlack);
    const std::string what = e.what();
    report_message("get from the stopped worker", what);
    EXPECT_TRUE(contains(what, "node 1")) << what;
    EXPECT_TRUE(contains(what, std::to_string(kTimeout.count()) + " ms")) << what;
  } catch (...) {
    ADD_FAILURE() << "expected a TimeoutError, got " << describe(std::current_exception());
  }
  // The other node never waited for it.
  const auto start = Clock::now();
  NodeScope on(0);
  EXPECT_FLOAT_EQ(DistributedTensor::ones({4}).sum().item<float>(), 4.0f);
  EXPECT_LT(Clock::now() - start, 500ms);
  job.signal(1, SIGCONT);
  const JobEnd& end = job.stop();
  EXPECT_LT(end.shutdown_took, kTimeout + kSlack) << "shutdown() after the stall";
  for (int code : end.exit_codes) EXPECT_NE(code, -1) << "a worker was still running after the session";
}

TEST(StalledPeer, WorkersWaitingOnAStoppedPeerTimeOutNamingIt) {
  // The workers' own timeout bounds their waits for each other; the master waits
  // longer, so what it reports is the workers' error.
  WorkerJob job({.workers = 3, .timeout = 10000ms, .worker_timeout = kTimeout});
  std::vector<DistributedTensor> grads;
  for (int node = 0; node < 3; ++node) {
    NodeScope on(node);
    grads.push_back(DistributedTensor::ones({1024}));
  }
  synchronize();
  job.signal(2, SIGSTOP);
  const auto stopped = Clock::now();
  // Nodes 0 and 1 run it on side streams, so their command loops stay free; the
  // streams' own synchronize() raises what failed on them.
  std::vector<Stream> side = {Stream::create(0), Stream::create(1)};
  {
    StreamScope in0(side[0]), in1(side[1]);
    all_reduce(grads);
  }
  for (int node : {0, 1}) {
    try {
      side[static_cast<size_t>(node)].synchronize();
      ADD_FAILURE() << "node " << node << " finished an all_reduce with a stopped member";
    } catch (const RemoteError& e) {
      const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - stopped);
      report_timing("all_reduce on node " + std::to_string(node), took);
      EXPECT_LE(took, kTimeout + kSlack);
      const std::string what = e.what();
      report_message("all_reduce on node " + std::to_string(node), what);
      EXPECT_EQ(e.context().node, node) << what;
      EXPECT_TRUE(contains(what, "all_reduce")) << what;
      EXPECT_TRUE(contains(what, "deadline")) << what;
      // It names whom it waited for: node 2 (DataChannel rank 3, rank 2 of the group
      // of nodes 0..2), or node 1 for node 0 when node 0 waited on node 1, itself
      // waiting on node 2.
      EXPECT_TRUE(contains(what, "rank 3") || contains(what, "rank 2") || contains(what, "rank 1")) << what;
    } catch (...) {
      ADD_FAILURE() << "node " << node << ": expected a RemoteError, got " << describe(std::current_exception());
    }
  }
  job.kill(2);
  try {
    synchronize();
  } catch (const Error&) {
  }
  expect_clean_end(job, {2});
}

TEST(StalledPeer, AGetBehindAStuckStreamIsAnsweredWithinTheWorkersTimeout) {
  // A get runs on the node's default stream, which first waits (at most the
  // worker's timeout) for the node's other streams. When they do not finish, the
  // worker must say so on the get's own channel: the master waits there, with a
  // timeout of its own that may be far longer.
  WorkerJob job({.timeout = 10000ms, .worker_timeout = kTimeout, .test_hooks = true});
  Stream stuck = Stream::create(0);
  Stream opener = Stream::create(0);
  DistributedTensor t;
  {
    NodeScope on(0);
    t = DistributedTensor::ones({4});
  }
  synchronize();
  {
    StreamScope in(stuck);
    detail::test_latch_wait(/*key=*/3, 20s);
  }
  const auto start = Clock::now();
  try {
    t.get();
    ADD_FAILURE() << "get() ran though the node's other stream never finished";
  } catch (const RemoteError& e) {
    const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    report_timing("get behind the stuck stream", took);
    EXPECT_LE(took, kTimeout + kSlack);
    const std::string what = e.what();
    report_message("get behind the stuck stream", what);
    EXPECT_EQ(e.context().node, 0) << what;
    EXPECT_TRUE(contains(what, std::to_string(kTimeout.count()) + " ms")) << what;
  } catch (...) {
    ADD_FAILURE() << "expected a RemoteError, got " << describe(std::current_exception());
  }
  {
    StreamScope in(opener);
    detail::test_latch_open(3);
  }
  try {
    synchronize();
  } catch (const Error&) {
  }
  expect_clean_end(job, {});
}

}  // namespace
}  // namespace thd::test
