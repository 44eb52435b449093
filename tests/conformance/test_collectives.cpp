// Every collective x every dtype x sizes 0, 1, 7 and one of 1 MiB and odd bytes,
// roots 0 and last, at world sizes 1, 2, 3 and 5 (ranks as threads).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <thread>

#include "backends.h"
#include "checks.h"
#include "op_checks.h"
#include "rank_threads.h"
#include "tensors.h"

namespace thd::conformance {
namespace {

class Collectives : public BackendWorldTest {};

// The op a dtype is summed with: bool has no sum in the contract, so its
// "sum" is the logical or that max is.
ReduceOp sum_like(DType dtype) { return dtype == kBool ? ReduceOp::Max : ReduceOp::Sum; }

TEST_P(Collectives, Broadcast) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    const int last = env.size - 1;
    uint64_t salt = 100;
    for (DType dtype : all_dtypes()) {
      for (int64_t numel : kSmallSizes) {
        for (int root : {0, last}) check_broadcast(env.dc, dtype, numel, root, ++salt);
      }
    }
    check_broadcast(env.dc, kFloat32, large_numel(kFloat32), last, ++salt);
    check_broadcast(env.dc, kUInt8, large_numel(kUInt8), 0, ++salt);
  });
}

TEST_P(Collectives, AllReduce) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    uint64_t salt = 200;
    for (DType dtype : all_dtypes()) {
      for (int64_t numel : kSmallSizes) check_all_reduce(env.dc, dtype, numel, sum_like(dtype), ++salt);
    }
    check_all_reduce(env.dc, kFloat32, large_numel(kFloat32), ReduceOp::Sum, ++salt);
    check_all_reduce(env.dc, kInt32, large_numel(kInt32), ReduceOp::Max, ++salt);
    check_all_reduce(env.dc, kFloat64, large_numel(kFloat64), ReduceOp::Avg, ++salt);
  });
}

TEST_P(Collectives, Reduce) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    const int last = env.size - 1;
    uint64_t salt = 300;
    for (DType dtype : all_dtypes()) {
      for (int64_t numel : kSmallSizes) {
        for (int root : {0, last}) check_reduce(env.dc, dtype, numel, root, sum_like(dtype), ++salt);
      }
    }
    check_reduce(env.dc, kFloat32, large_numel(kFloat32), last, ReduceOp::Sum, ++salt);
  });
}

TEST_P(Collectives, AllGather) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    uint64_t salt = 400;
    for (DType dtype : all_dtypes()) {
      for (int64_t numel : kSmallSizes) check_all_gather(env.dc, dtype, numel, ++salt);
    }
    check_all_gather(env.dc, kUInt8, large_numel(kUInt8), ++salt);
  });
}

TEST_P(Collectives, ReduceScatter) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    uint64_t salt = 500;
    for (DType dtype : all_dtypes()) {
      for (int64_t block : kSmallSizes) check_reduce_scatter(env.dc, dtype, block, sum_like(dtype), ++salt);
    }
    // A block of 256 KiB and 4 bytes: chunked algorithms see a remainder.
    check_reduce_scatter(env.dc, kFloat32, large_numel(kFloat32) / 4 + 1, ReduceOp::Sum, ++salt);
  });
}

TEST_P(Collectives, Gather) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    const int last = env.size - 1;
    uint64_t salt = 600;
    for (DType dtype : all_dtypes()) {
      for (int64_t numel : kSmallSizes) {
        check_gather(env.dc, dtype, numel, 0, /*undefined_elsewhere=*/true, ++salt);
        check_gather(env.dc, dtype, numel, last, /*undefined_elsewhere=*/false, ++salt);
      }
    }
    check_gather(env.dc, kInt64, large_numel(kInt64), last, true, ++salt);
  });
}

TEST_P(Collectives, Scatter) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    const int last = env.size - 1;
    uint64_t salt = 700;
    for (DType dtype : all_dtypes()) {
      for (int64_t numel : kSmallSizes) {
        check_scatter(env.dc, dtype, numel, 0, /*undefined_elsewhere=*/true, ++salt);
        check_scatter(env.dc, dtype, numel, last, /*undefined_elsewhere=*/false, ++salt);
      }
    }
    check_scatter(env.dc, kFloat32, large_numel(kFloat32), 0, true, ++salt);
  });
}

TEST_P(Collectives, AllToAll) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    uint64_t salt = 800;
    for (DType dtype : all_dtypes()) {
      for (int64_t block : kSmallSizes) check_all_to_all(env.dc, dtype, block, ++salt);
    }
    check_all_to_all(env.dc, kUInt8, large_numel(kUInt8) / env.size + 1, ++salt);
  });
}

TEST_P(Collectives, BarrierReleasesNoRankBeforeEveryRankArrived) {
  constexpr int kRounds = 6;
  run_world(backend(), world_size(), [&](RankEnv& env) {
    for (int round = 0; round < kRounds; ++round) {
      // One rank arrives late each round: a barrier that does not wait for it
      // lets the others through before it counted itself. Counted in the store,
      // which ranks in other processes share too.
      const std::string arrived = "barrier/arrived/" + std::to_string(round);
      if (env.rank == round % env.size) std::this_thread::sleep_for(std::chrono::milliseconds(30));
      env.store->add(arrived, 1);
      env.dc.barrier();
      const int seen = static_cast<int>(env.store->add(arrived, 0));
      require(seen == env.size, "barrier round " + std::to_string(round) + " returned when " + std::to_string(seen) +
                                    " of " + std::to_string(env.size) + " ranks had arrived");
    }
  });
}

THD_CONFORMANCE_BACKENDS_X_WORLDS(Collectives, kWorldSizes);

}  // namespace
}  // namespace thd::conformance
