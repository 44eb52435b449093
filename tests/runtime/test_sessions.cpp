// Sessions begin with init_master_worker and end with shutdown, several times in one
// process: the workers exit cleanly, handles of an ended session refuse to work
// (rather than reaching into the next session), and shutdown raises a remote error
// nobody has seen yet.
#include <gtest/gtest.h>

#include <functional>
#include <optional>

#include <thd/distributed.h>
#include <thd/stream.h>

#include "datachannel/transport.h"
#include "local_job.h"
#include "remote_check.h"

namespace thd::test {
namespace {

// Whether `error` holds an E.
template <typename E>
bool raises_as(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

TEST(Sessions, SeveralSessionsOneAfterAnother) {
  EXPECT_FALSE(is_master());
  DistributedTensor from_first;
  {
    LocalJob first(1);
    EXPECT_TRUE(is_master());
    EXPECT_EQ(num_nodes(), 1);
    from_first = DistributedTensor::full({3}, 5, kInt32);
    EXPECT_TRUE(same_tensor(from_first.get(), Tensor::full({3}, 5, kInt32)));
    EXPECT_EQ(first.stop().problems(), "");
    EXPECT_FALSE(is_master());
  }
  // Nothing of the ended session works any more, and nothing crashes.
  EXPECT_THROW(from_first.get(), Error);
  EXPECT_THROW(from_first.add(1), Error);
  EXPECT_THROW(DistributedTensor::zeros({2}), Error);
  EXPECT_NO_THROW(shutdown()) << "shutdown() twice must be safe";

  LocalJob second(2);
  EXPECT_TRUE(is_master());
  EXPECT_EQ(num_nodes(), 2);
  DistributedTensor fresh = DistributedTensor::full({3}, 9, kInt32);
  // The first session's handle does not alias a tensor of the second.
  EXPECT_THROW(from_first.get(), Error);
  EXPECT_THROW((void)(fresh + from_first), Error);
  EXPECT_TRUE(same_tensor(fresh.to_node(1).get(), Tensor::full({3}, 9, kInt32)));
  from_first = {};  // releasing a handle of an ended session is harmless
  EXPECT_EQ(second.stop().problems(), "");
}

TEST(Sessions, ShutdownReleasesTheMastersChannelWhileHandlesLiveOn) {
  // The master's counterpart of the workers' exit check (local_job.cpp): a
  // transport still alive when the program exits has its progress thread inside
  // the backend's library while exit() tears that library down. Handles that
  // outlive shutdown() must not keep the channel (they hold the session weakly).
  const int before = detail::Transport::live_count();
  DistributedTensor kept;
  std::optional<Stream> stream;
  std::optional<Event> event;
  {
    LocalJob job(2);
    EXPECT_GT(detail::Transport::live_count(), before);
    kept = DistributedTensor::full({3}, 1, kInt32);
    stream = Stream::create(1);
    event = stream->record();
    EXPECT_EQ(job.stop().problems(), "");
    EXPECT_EQ(detail::Transport::live_count(), before) << "the ended session's transport is still alive";
  }
  EXPECT_THROW(kept.get(), Error);
  // In the next session they say which of them belongs to the one that ended.
  LocalJob next(1);
  auto expect_ended = [](const std::function<void()>& call, const std::string& which) {
    try {
      call();
      ADD_FAILURE() << "no error";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("the " + which + " belongs to a session that has ended"),
                std::string::npos)
          << e.what();
    }
  };
  Event fresh_event;
  Stream fresh_stream = Stream::create(0);
  expect_ended([&] { fresh_event.record(*stream); }, "stream");
  expect_ended([&] { stream->wait(fresh_event); }, "stream");
  expect_ended([&] { fresh_stream.wait(*event); }, "event");
  expect_ended([&] { event->synchronize(); }, "event");
  EXPECT_EQ(next.stop().problems(), "");
}

TEST(Sessions, ShutdownRaisesAnUnseenRemoteError) {
  LocalJob job(1);
  {
    DistributedTensor x = DistributedTensor::zeros({3});
    DistributedTensor bad = x.index_select(0, make({1}, kInt64, {7}).dist_send());  // never downloaded
  }
  const JobEnd& end = job.stop();
  ASSERT_TRUE(end.shutdown_error) << "shutdown() did not raise the unreported error";
  // The RemoteError of the worker's error's kind: an index out of range.
  EXPECT_TRUE(raises_as<RemoteIndexError>(end.shutdown_error)) << error_type(end.shutdown_error) << ": "
                                                               << error_text(end.shutdown_error);
  EXPECT_EQ(end.worker_exit_codes, std::vector<int>{0}) << "the worker did not exit cleanly after the session";
}

}  // namespace
}  // namespace thd::test
