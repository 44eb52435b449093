// A worker's error reaches the master as the RemoteError subclass of its kind
// (include/thd/error.h): a remote out-of-memory is caught as RemoteOutOfMemoryError,
// an index out of range as RemoteIndexError, by whichever path it comes back (a get,
// thd::synchronize(), an event, a copy to another node, a stream that waited on a
// failed event), and every tensor poisoned by the failure raises the original kind.
#include <gtest/gtest.h>

#include <string>

#include <thd/distributed.h>
#include <thd/stream.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class RemoteErrorKinds : public JobTest<2> {};

const Tensor kData = Tensor::arange(0, 12, 1, kFloat32).view({4, 3});
const Tensor kBadIndex = make({2}, kInt64, {1, 9});  // 9 is out of range for dim 0 (size 4)

// get() of `t` raises E (a RemoteError of `kind`) for `op` on `node`.
template <typename E>
::testing::AssertionResult raises(const DistributedTensor& t, ErrorKind kind, const std::string& op, int node) {
  try {
    Tensor got = t.get();
    return ::testing::AssertionFailure() << "get() returned " << got.str() << " instead of raising";
  } catch (const E& e) {
    if (e.kind() != kind) return ::testing::AssertionFailure() << "kind " << error_kind_name(e.kind()) << ": " << e.what();
    if (e.context().op != op || e.context().node != node) {
      return ::testing::AssertionFailure() << "expected op " << op << " on node " << node << ": " << e.what();
    }
    return ::testing::AssertionSuccess();
  } catch (...) {
    return ::testing::AssertionFailure() << "get() threw " << error_type(std::current_exception()) << ": "
                                         << error_text(std::current_exception());
  }
}

TEST_F(RemoteErrorKinds, AWorkerOutOfMemoryIsCaughtByType) {
  for (int node : {0, 1}) {
    SCOPED_TRACE("node " + std::to_string(node));
    const int64_t elements = int64_t{1} << 40;  // 4 TiB of float32: more than any node holds
    DistributedTensor huge = DistributedTensor::empty({elements}, kFloat32, Device::cpu());
    NodeScope on(node);
    DistributedTensor there = DistributedTensor::zeros({elements});
    try {
      there.sum().get();  // not there.get(): the master would need 4 TiB for its copy
      ADD_FAILURE() << "a 4 TiB tensor was made";
    } catch (const RemoteOutOfMemoryError& e) {
      EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
      EXPECT_EQ(e.context().node, node);
      EXPECT_EQ(e.context().op, "zeros") << e.what();
      const std::string what = e.what();
      EXPECT_NE(what.find(std::to_string(elements * 4) + " more bytes"), std::string::npos)
          << "does not name the bytes asked for: " << what;
      EXPECT_NE(what.find("op " + std::to_string(e.op_id()) + " failed on node " + std::to_string(node)),
                std::string::npos)
          << what;
    }
    EXPECT_TRUE(raises<RemoteError>(huge.sum(), ErrorKind::OutOfMemory, "empty", 0));
    // The node survived.
    EXPECT_TRUE(same_tensor(DistributedTensor::ones({3}).get(), Tensor::ones({3})));
  }
}

TEST_F(RemoteErrorKinds, TheKindIsThatOfTheWorkersOwnError) {
  DistributedTensor x = kData.dist_send(1);
  EXPECT_TRUE(raises<RemoteIndexError>(x.index_select(0, kBadIndex.dist_send(1)), ErrorKind::Index, "index_select", 1));
  const Tensor ints = Tensor::arange(3);
  const Tensor exps = make({3}, kInt64, {1, -1, 2});
  ErrorKind local = ErrorKind::Generic;
  try {
    ints.pow(exps);
  } catch (const Error& e) {
    local = error_kind_of(e);
  }
  ASSERT_NE(local, ErrorKind::Generic) << "negative integer powers no longer fail locally";
  try {
    ints.dist_send(0).pow(exps.dist_send(0)).get();
    ADD_FAILURE() << "a negative integer power did not fail on the worker";
  } catch (const RemoteError& e) {
    EXPECT_EQ(e.kind(), local) << e.what();
  }
}

TEST_F(RemoteErrorKinds, EveryTensorPoisonedByAFailureRaisesItsKind) {
  DistributedTensor bad = kData.dist_send(0).index_select(0, kBadIndex.dist_send(0));
  DistributedTensor y = (bad + 1).sum();
  DistributedTensor target = DistributedTensor::zeros({2, 3});
  target.add_(bad);
  DistributedTensor moved = (bad * 2).to_node(1);  // the poison travels with the copy
  for (const DistributedTensor* t : {&bad, &y, &target, &moved}) {
    EXPECT_TRUE(raises<RemoteIndexError>(*t, ErrorKind::Index, "index_select", 0));
  }
  EXPECT_TRUE(raises<RemoteIndexError>(moved + 1, ErrorKind::Index, "index_select", 0));
}

TEST_F(RemoteErrorKinds, SynchronizeRaisesAnUnseenErrorByItsKind) {
  DistributedTensor bad = kData.dist_send(1).index_select(0, kBadIndex.dist_send(1));
  try {
    synchronize();
    ADD_FAILURE() << "synchronize() did not raise the failed op";
  } catch (const RemoteIndexError& e) {
    EXPECT_EQ(e.context().op, "index_select") << e.what();
    EXPECT_EQ(e.context().node, 1) << e.what();
  }
}

TEST_F(RemoteErrorKinds, EventsAndTheStreamsWaitingOnThemRaiseTheKind) {
  for (int waiter_node : {0, 1}) {
    SCOPED_TRACE("waiting on node " + std::to_string(waiter_node));
    Stream failing = Stream::create(0);
    Stream waiting = Stream::create(waiter_node);
    Event after_failure;
    {
      StreamScope in(failing);
      DistributedTensor bad = kData.dist_send(0).index_select(0, kBadIndex.dist_send(0));
      after_failure.record();
    }
    waiting.wait(after_failure);  // on node 1: node 0's EventNotice carries the failure
    DistributedTensor unrelated;
    {
      StreamScope in(waiting);
      unrelated = DistributedTensor::ones({3}) * 2;
    }
    EXPECT_TRUE(raises<RemoteIndexError>(unrelated, ErrorKind::Index, "index_select", 0));
    // The event's own status (EventStatus) carries it too.
    try {
      after_failure.synchronize();
      ADD_FAILURE() << "the event of a failed stream did not raise";
    } catch (const RemoteIndexError& e) {
      EXPECT_EQ(e.context().op, "index_select") << e.what();
    }
    EXPECT_NO_THROW(synchronize());
  }
}

}  // namespace
}  // namespace thd::test
