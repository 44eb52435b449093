// Every reduce op on every dtype it applies to, through all_reduce, reduce and
// reduce_scatter, against exact references computed in the test.
#include <gtest/gtest.h>

#include "backends.h"
#include "op_checks.h"
#include "rank_threads.h"
#include "tensors.h"

namespace thd::conformance {
namespace {

class ReduceOps : public BackendWorldTest {};

TEST_P(ReduceOps, AllReduceEveryOpEveryDtype) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    uint64_t salt = 1000;
    for (ReduceOp op : all_reduce_ops()) {
      for (DType dtype : all_dtypes()) {
        if (!reduce_applies(op, dtype)) continue;
        check_all_reduce(env.dc, dtype, 1, op, ++salt);
        // 33: more elements than ranks, and not a multiple of any world size here.
        check_all_reduce(env.dc, dtype, 33, op, ++salt);
      }
    }
  });
}

TEST_P(ReduceOps, ReduceEveryOpEveryDtype) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    uint64_t salt = 2000;
    const int last = env.size - 1;
    for (ReduceOp op : all_reduce_ops()) {
      for (DType dtype : all_dtypes()) {
        if (reduce_applies(op, dtype)) check_reduce(env.dc, dtype, 7, last, op, ++salt);
      }
    }
  });
}

TEST_P(ReduceOps, ReduceScatterEveryOpEveryDtype) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    uint64_t salt = 3000;
    for (ReduceOp op : all_reduce_ops()) {
      for (DType dtype : all_dtypes()) {
        if (reduce_applies(op, dtype)) check_reduce_scatter(env.dc, dtype, 3, op, ++salt);
      }
    }
  });
}

THD_CONFORMANCE_BACKENDS_X_WORLDS(ReduceOps, kWorldSizes);

}  // namespace
}  // namespace thd::conformance
