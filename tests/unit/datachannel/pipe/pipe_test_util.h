// What the MessagePipe tests of every backend share: an op that records how it
// ended, and the options of one rank of a test world.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <utility>

#include <thd/datachannel.h>
#include <thd/store.h>

#include "datachannel/pipe/message_pipe.h"
#include "datachannel/test_util.h"

namespace thd::test {

// A PipeOp that remembers how it ended and how often it was told (more than once is
// a pipe bug the tests check for).
class TestOp final : public detail::pipe::PipeOp {
 public:
  void done(std::exception_ptr error, size_t bytes) noexcept override {
    error_ = std::move(error);
    bytes_ = bytes;
    calls_.fetch_add(1, std::memory_order_release);
  }
  bool finished() const { return calls_.load(std::memory_order_acquire) > 0; }
  int calls() const { return calls_.load(std::memory_order_acquire); }
  const std::exception_ptr& error() const { return error_; }
  size_t bytes() const { return bytes_; }

 private:
  std::atomic<int> calls_{0};
  std::exception_ptr error_;
  size_t bytes_ = 0;
};

inline DataChannelOptions options_for(std::shared_ptr<Store> store, int rank, int world,
                                      std::chrono::milliseconds timeout = kLong) {
  DataChannelOptions o;
  o.store = std::move(store);
  o.rank = rank;
  o.world_size = world;
  o.timeout = timeout;
  return o;
}

}  // namespace thd::test
