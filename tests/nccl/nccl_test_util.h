// What the nccl backend's tests share: the GPU skips, and worlds of nccl channels
// whose ranks are threads of this process (one process may drive several GPUs;
// forking after CUDA started is not allowed, so the tests never fork).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <thd/cuda.h>
#include <thd/datachannel.h>
#include <thd/store.h>

#include "datachannel/test_util.h"

// First statement of a test that needs `n` GPUs: one rank per GPU.
#define THD_REQUIRE_GPUS(n)                                                                                  \
  do {                                                                                                       \
    const int thd_gpus_ = ::thd::cuda::device_count();                                                       \
    if (thd_gpus_ == 0) GTEST_SKIP() << "no CUDA device";                                                    \
    if (thd_gpus_ < (n)) {                                                                                   \
      GTEST_SKIP() << "needs " << (n) << " GPUs (NCCL runs each rank on a GPU of its own); this machine has " \
                   << thd_gpus_;                                                                             \
    }                                                                                                        \
  } while (0)

namespace thd::test {

inline DataChannelOptions nccl_options(const std::shared_ptr<Store>& store, int rank, int world,
                                       std::chrono::milliseconds timeout = kLong) {
  DataChannelOptions o;
  o.store = store;
  o.rank = rank;
  o.world_size = world;
  o.timeout = timeout;
  o.token = kToken;
  return o;
}

// Runs body(rank, channel) on `world` threads, each with its own channel of
// `backend` over one in-process store, and rethrows the first rank's error (as
// a test failure naming the rank). Every rank passes a host barrier before its
// channel closes (unless the body shut it down), so no rank's channel goes while
// another still uses it.
inline void run_world(const std::string& backend, int world,
                      const std::function<void(int, const std::shared_ptr<DataChannel>&)>& body) {
  auto store = std::make_shared<HashStore>(kLong);
  const auto errors = run_rank_threads(world, [&](int rank) {
    auto channel = DataChannel::create(backend, nccl_options(store, rank, world));
    std::exception_ptr failed;
    try {
      body(rank, channel);
    } catch (...) {
      failed = std::current_exception();
    }
    if (!channel->is_shut_down()) channel->barrier();
    if (failed) std::rethrow_exception(failed);
  });
  for (int r = 0; r < world; ++r) {
    if (!errors[static_cast<size_t>(r)]) continue;
    try {
      std::rethrow_exception(errors[static_cast<size_t>(r)]);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << ": " << e.what();
    }
  }
}

}  // namespace thd::test
