// float16 and bfloat16 sums accumulate in float32 and are rounded once, on every
// backend and through every algorithm (torch.distributed's _test_allreduce_basics:
// float32-accurate within rtol 1e-3). Four ranks contribute 15464, 5632, -13960
// and -7592: summed in float32 and rounded once that is -456 in float16 and -416
// in bfloat16 (whose inputs round to 15488, 5632, -13952 and -7584); rounded to 16
// bits after every step it is -464 or -384, depending on the order of the steps.
// Every rank must end with the same bits.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "backends.h"
#include "checks.h"
#include "rank_threads.h"

namespace thd::conformance {
namespace {

constexpr int kRanks = 4;
constexpr std::array<double, kRanks> kInputs = {15464, 5632, -13960, -7592};
// torch.testing's rtol for the 16-bit sums of _test_allreduce_basics.
constexpr double kRtol = 1e-3;

// The sizes the cases run at: one element (recursive doubling, a tree, or a
// backend's native collective), a block that is not a multiple of the group, and
// one past every size limit under which a backend's native collectives or the
// small-message algorithms take the call (ring all-reduce and ring reduce).
constexpr std::array<int64_t, 3> kCounts = {1, 1001, 300'000};

// Instantiated for a world of kRanks only (the inputs are the issue's); the mpi
// backend's case runs in a launch of that size (conformance.mpi.n4).
class HalfAccumulation : public BackendWorldTest {};
const std::vector<int> kWorlds = {kRanks};

// The 16-bit sum of the four inputs done right.
double expected_sum(DType dtype) { return dtype == kFloat16 ? -456 : -416; }

// Every element of `t` within torch's tolerance of `expected`, and every rank's
// bits the same as this one's.
void require_everywhere(RankEnv& env, const Tensor& t, double expected, const std::string& what) {
  const std::vector<float> values = t.to(kFloat32).to_vector<float>();
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::abs(values[i] - expected) <= kRtol * std::abs(expected)) continue;
    fail(what + ": element " + std::to_string(i) + " is " + std::to_string(values[i]) + " on rank " +
         std::to_string(env.rank) + ", expected " + std::to_string(expected) +
         " (within rtol 1e-3): the 16-bit partial sums were rounded before the end");
  }
  Tensor all = Tensor::empty({env.size * t.numel()}, t.dtype());
  env.dc.all_gather(all, t.contiguous().reshape({t.numel()}));
  for (int r = 0; r < env.size; ++r) {
    require_same(all.slice(0, r * t.numel(), (r + 1) * t.numel()), t.reshape({t.numel()}),
                 what + ": rank " + std::to_string(r) + "'s result against rank " + std::to_string(env.rank) + "'s");
  }
}

Tensor contribution(RankEnv& env, DType dtype, int64_t count) {
  return Tensor::full({count}, kInputs[static_cast<size_t>(env.rank)], dtype);
}

std::string label(const char* op, DType dtype, int64_t count, const char* reduce = "sum") {
  return std::string(op) + " " + reduce + " of " + std::to_string(count) + " " + std::string(dtype_name(dtype)) +
         " elements";
}

TEST_P(HalfAccumulation, AllReduceSumRoundsOnce) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    for (DType dtype : {kFloat16, kBFloat16}) {
      for (int64_t count : kCounts) {
        Tensor t = contribution(env, dtype, count);
        env.dc.all_reduce(t, ReduceOp::Sum);
        require_everywhere(env, t, expected_sum(dtype), label("all_reduce", dtype, count));
      }
    }
  });
}

TEST_P(HalfAccumulation, AllReduceAvgRoundsOnce) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    for (DType dtype : {kFloat16, kBFloat16}) {
      Tensor t = contribution(env, dtype, kCounts[1]);
      env.dc.all_reduce(t, ReduceOp::Avg);
      require_everywhere(env, t, expected_sum(dtype) / kRanks, label("all_reduce", dtype, kCounts[1], "avg"));
    }
  });
}

TEST_P(HalfAccumulation, ReduceSumRoundsOnceOnTheRootOnly) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    const int root = kRanks - 1;
    for (DType dtype : {kFloat16, kBFloat16}) {
      for (int64_t count : kCounts) {
        const Tensor mine = contribution(env, dtype, count);
        Tensor t = mine.clone();
        env.dc.reduce(t, root, ReduceOp::Sum);
        const std::string what = label("reduce", dtype, count);
        if (env.rank == root) {
          const std::vector<float> values = t.to(kFloat32).to_vector<float>();
          for (size_t i = 0; i < values.size(); ++i) {
            // The message only on failure: 300,000 of them cost minutes under the
            // sanitizers' slow unwinder (the mpi launches use it), and the other
            // ranks meet the next collective's deadline meanwhile.
            if (std::abs(values[i] - expected_sum(dtype)) <= kRtol * std::abs(expected_sum(dtype))) continue;
            fail(what + ": element " + std::to_string(i) + " is " + std::to_string(values[i]) +
                 " on the root, expected " + std::to_string(expected_sum(dtype)));
          }
        } else {
          require_same(t, mine, what + ": a non-root's buffer changed");
        }
      }
    }
  });
}

TEST_P(HalfAccumulation, ReduceScatterSumRoundsOnce) {
  run_world(backend(), world_size(), [](RankEnv& env) {
    for (DType dtype : {kFloat16, kBFloat16}) {
      for (int64_t count : {kCounts[0], kCounts[1]}) {
        const Tensor in = contribution(env, dtype, kRanks * count);
        Tensor out = Tensor::empty({count}, dtype);
        env.dc.reduce_scatter(out, in, ReduceOp::Sum);
        require_everywhere(env, out, expected_sum(dtype), label("reduce_scatter", dtype, count));
      }
    }
  });
}

THD_CONFORMANCE_BACKENDS_X_WORLDS(HalfAccumulation, kWorlds);

}  // namespace
}  // namespace thd::conformance
