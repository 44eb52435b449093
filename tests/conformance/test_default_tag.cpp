// Collectives on the world group's default tag (0), the calls a backend may hand to
// its library's own collectives (the mpi backend: small all_reduces go to
// MPI_Allreduce, datachannel/mpi/mpi_host_collectives.h). Whoever runs them, the
// contract holds: ranks that disagree get an error naming both calls, a rank that
// never comes is a timeout, and a late rank is not left hanging.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "backends.h"
#include "checks.h"
#include "rank_launched.h"
#include "rank_threads.h"
#include "tensors.h"

namespace thd::conformance {
namespace {

using std::chrono::milliseconds;

// How much later than its deadline a failed call may return.
constexpr milliseconds kSlack{4000};

// Runs `call`; its error (null when it succeeded) goes to `error`. Returns how long it took.
milliseconds outcome_of(const std::function<void()>& call, std::exception_ptr* error) {
  return time_of([&] {
    try {
      call();
    } catch (...) {
      *error = std::current_exception();
    }
  });
}

class DefaultTag : public BackendTest {};

TEST_P(DefaultTag, SmallAllReducesGoToTheLibraryWhereItHasThem) {
  if (backend() != "mpi") GTEST_SKIP() << "only the mpi backend hands collectives to its library";
  run_world(backend(), 2, [](RankEnv& env) {
    // 4 KiB: MPI's own, so thd's transport moves no message for it.
    Tensor small = Tensor::full({1024}, env.rank + 1, kFloat32);
    const uint64_t before = env.dc.traffic().messages_sent;
    env.dc.all_reduce(small);
    require(env.dc.traffic().messages_sent == before,
            "a 4 KiB all_reduce on the default tag went through thd's transport, not MPI_Allreduce");
    require_same(small, Tensor::full({1024}, 3, kFloat32), "a 4 KiB all_reduce by MPI");
    // Integer ops MPI has; Avg as MPI's sum divided here.
    Tensor bits = Tensor::full({16}, env.rank == 0 ? 6 : 3, kInt64);
    env.dc.all_reduce(bits, ReduceOp::BAnd);
    require_same(bits, Tensor::full({16}, 2, kInt64), "a bitwise-and all_reduce by MPI");
    Tensor avg = Tensor::full({8}, env.rank == 0 ? 1.0 : 4.0, kFloat64);
    env.dc.all_reduce(avg, ReduceOp::Avg);
    require_same(avg, Tensor::full({8}, 2.5, kFloat64), "an average all_reduce by MPI");
    require(env.dc.traffic().messages_sent == before, "a small integer or average all_reduce went through thd's");
    // 1 MiB, another tag, or a float max (NaN handling MPI leaves open): thd's own.
    Tensor large = Tensor::full({1 << 18}, 1, kFloat32);
    env.dc.all_reduce(large);
    require(env.dc.traffic().messages_sent > before, "a 1 MiB all_reduce did not use thd's own algorithm");
    require_same(large, Tensor::full({1 << 18}, 2, kFloat32), "a 1 MiB all_reduce");
    const uint64_t mid = env.dc.traffic().messages_sent;
    Tensor tagged = Tensor::full({16}, 1, kFloat32);
    env.dc.all_reduce(tagged, ReduceOp::Sum, {.tag = 3});
    require(env.dc.traffic().messages_sent > mid, "an all_reduce on tag 3 did not use thd's own algorithm");
    const uint64_t later = env.dc.traffic().messages_sent;
    Tensor nan = Tensor::full({4}, env.rank == 0 ? std::nan("") : 1.0, kFloat32);
    env.dc.all_reduce(nan, ReduceOp::Max);
    require(env.dc.traffic().messages_sent > later, "a float max did not use thd's own algorithm");
    require(std::isnan(nan.max().item<float>()), "a float max all_reduce dropped a NaN");
  });
}

TEST_P(DefaultTag, MismatchedAllReducesNameBothCalls) {
  struct Case {
    std::string name;
    std::function<Tensor(int rank)> tensor;
    std::vector<std::string> needles;
    bool type_error;
  };
  const std::vector<Case> cases = {
      {"counts", [](int rank) { return Tensor::ones({rank == 0 ? 16 : 32}, kFloat32); },
       {"16 elements", "32 elements"}, false},
      {"dtypes", [](int rank) { return Tensor::ones({16}, rank == 0 ? kFloat32 : kInt32); }, {"float32", "int32"},
       true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    // A world of its own per case: after a failed collective its tag may be unusable.
    std::vector<std::exception_ptr> outcome(2);
    bool collected = false;
    run_world(backend(), 2, [&](RankEnv& env) {
      Tensor t = c.tensor(env.rank);
      std::exception_ptr mine;
      const milliseconds took =
          outcome_of([&] { env.dc.all_reduce(t, ReduceOp::Sum, {.timeout = milliseconds(1500)}); }, &mine);
      require(took < milliseconds(1500) + kSlack, "the mismatched all_reduce took " + std::to_string(took.count()) +
                                                      " ms to fail");
      auto all = share_outcomes(env, "default-tag/" + c.name, mine);
      if (env.rank == 0) {
        outcome = std::move(all);
        collected = true;
      }
    });
    if (!collected) continue;  // launched ranks: rank 0's process checks (or another world size)
    int named = 0;
    for (int r = 0; r < 2; ++r) {
      ASSERT_NE(outcome[static_cast<size_t>(r)], nullptr) << "rank " << r << " succeeded";
      const std::string text = describe(outcome[static_cast<size_t>(r)]);
      bool all_needles = text.find(c.type_error ? "TypeError" : "ValueError") != std::string::npos;
      for (const auto& n : c.needles) all_needles = all_needles && text.find(n) != std::string::npos;
      if (all_needles) ++named;
      else EXPECT_NE(text.find("TimeoutError"), std::string::npos) << "rank " << r << ": " << text;
    }
    EXPECT_GE(named, 1) << "no rank named both calls";
  }
}

TEST_P(DefaultTag, ALateRankTimesTheOtherOutAndIsNotLeftHanging) {
  run_world(backend(), 2, [&](RankEnv& env) {
    Tensor t = Tensor::full({256}, env.rank + 1, kFloat32);
    if (env.rank == 0) {
      const milliseconds took = time_of([&] {
        require_throws<TimeoutError>([&] { env.dc.all_reduce(t, ReduceOp::Sum, {.timeout = milliseconds(300)}); },
                                     {}, "an all_reduce rank 1 joins too late");
      });
      require(took < milliseconds(300) + kSlack, "the timed-out all_reduce took " + std::to_string(took.count()) +
                                                     " ms to fail");
      require_same(t, Tensor::full({256}, 1, kFloat32), "the tensor of an all_reduce that timed out");
    } else {
      std::this_thread::sleep_for(milliseconds(800));
      std::exception_ptr late;
      const milliseconds took =
          outcome_of([&] { env.dc.all_reduce(t, ReduceOp::Sum, {.timeout = milliseconds(3000)}); }, &late);
      require(took < milliseconds(3000) + kSlack, "the late all_reduce took " + std::to_string(took.count()) + " ms");
      // MPI's collective cannot be withdrawn: rank 0 finishes it once rank 1 comes,
      // with the data it was given. thd's own algorithms may fail the late call.
      if (env.dc.backend() == "mpi") {
        require(late == nullptr, "the late rank's all_reduce failed: " + describe(late));
        require_same(t, Tensor::full({256}, 3, kFloat32), "the late rank's all_reduce");
      }
    }
    // Another tag still works for both.
    Tensor again = Tensor::full({8}, 1, kInt32);
    env.dc.all_reduce(again, ReduceOp::Sum, {.tag = 9, .timeout = milliseconds(10000)});
    require_same(again, Tensor::full({8}, 2, kInt32), "an all_reduce on another tag after the timeout");
  });
}

}  // namespace

THD_CONFORMANCE_BACKENDS(DefaultTag);

}  // namespace thd::conformance
