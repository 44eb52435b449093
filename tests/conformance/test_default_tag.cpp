// Collectives on the world group's default tag (0), the calls a backend may hand to
// its library's own collectives (the mpi backend: small all_reduces and
// broadcasts, and barriers, go to MPI's, datachannel/mpi/mpi_host_collectives.h). Whoever runs them, the
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

TEST_P(DefaultTag, SmallBroadcastsGathersExchangesAndBarriersGoToTheLibraryWhereItHasThem) {
  if (backend() != "mpi") GTEST_SKIP() << "only the mpi backend hands collectives to its library";
  run_world(backend(), 2, [](RankEnv& env) {
    const uint64_t before = env.dc.traffic().messages_sent;
    // 4 KiB from rank 1: MPI_Bcast.
    Tensor small = Tensor::full({1024}, env.rank == 1 ? 7 : 0, kInt32);
    env.dc.broadcast(small, 1);
    require_same(small, Tensor::full({1024}, 7, kInt32), "a 4 KiB broadcast by MPI");
    env.dc.barrier();
    // 4 KiB a rank: MPI_Allgather, also with the input already in the output.
    Tensor gathered = Tensor::zeros({2048}, kInt32);
    env.dc.all_gather(gathered, Tensor::full({1024}, env.rank + 1, kInt32));
    Tensor expected = cat({Tensor::full({1024}, 1, kInt32), Tensor::full({1024}, 2, kInt32)});
    require_same(gathered, expected, "a 4 KiB all_gather by MPI");
    // Rank 0's input already in its output, rank 1's not: MPI wants one form on
    // every member.
    Tensor in_place = Tensor::zeros({2048}, kInt32);
    Tensor mine = env.rank == 0 ? in_place.narrow(0, 0, 1024) : Tensor::zeros({1024}, kInt32);
    mine.fill_(env.rank + 1);
    env.dc.all_gather(in_place, mine);
    require_same(in_place, expected, "a 4 KiB all_gather by MPI, in place on rank 0");
    // all_to_all, 4 KiB a rank: block j of rank r holds 10 r + j, and goes to rank j.
    Tensor blocks = cat({Tensor::full({1024}, 10 * env.rank, kInt32), Tensor::full({1024}, 10 * env.rank + 1, kInt32)});
    Tensor exchanged = Tensor::zeros({2048}, kInt32);
    env.dc.all_to_all(exchanged, blocks);
    require_same(exchanged,
                 cat({Tensor::full({1024}, env.rank, kInt32), Tensor::full({1024}, 10 + env.rank, kInt32)}),
                 "a 4 KiB all_to_all by MPI");
    // reduce_scatter, 1 KiB a rank, and its average as MPI's sum divided here.
    Tensor parts = cat({Tensor::full({256}, env.rank + 1, kFloat32), Tensor::full({256}, 4 * (env.rank + 1), kFloat32)});
    Tensor part = Tensor::zeros({256}, kFloat32);
    env.dc.reduce_scatter(part, parts, ReduceOp::Avg);
    require_same(part, Tensor::full({256}, env.rank == 0 ? 1.5 : 6.0, kFloat32), "a 1 KiB reduce_scatter by MPI");
    require(env.dc.traffic().messages_sent == before,
            "a small broadcast, all_gather, all_to_all or reduce_scatter, or a barrier, on the default tag went "
            "through thd's transport, not MPI's");
    // 1 MiB: thd's own.
    Tensor large = Tensor::full({1 << 18}, env.rank == 0 ? 5 : 0, kFloat32);
    env.dc.broadcast(large, 0);
    require(env.dc.traffic().messages_sent > before || env.rank != 0, "a 1 MiB broadcast did not use thd's own");
    require_same(large, Tensor::full({1 << 18}, 5, kFloat32), "a 1 MiB broadcast");
  });
}

TEST_P(DefaultTag, MismatchedCollectivesNameBothCalls) {
  using Call = std::function<void(DataChannel&, int rank, const CollectiveOptions&)>;
  struct Case {
    std::string name;
    Call call;
    std::vector<std::string> needles;
    bool type_error;
    bool mpi_only;
  };
  auto all_reduce_of = [](std::function<Tensor(int rank)> tensor) -> Call {
    return [tensor](DataChannel& dc, int rank, const CollectiveOptions& o) {
      Tensor t = tensor(rank);
      dc.all_reduce(t, ReduceOp::Sum, o);
    };
  };
  const std::vector<Case> cases = {
      {"counts", all_reduce_of([](int rank) { return Tensor::ones({rank == 0 ? 16 : 32}, kFloat32); }),
       {"16 elements", "32 elements"}, false, false},
      {"dtypes", all_reduce_of([](int rank) { return Tensor::ones({16}, rank == 0 ? kFloat32 : kInt32); }),
       {"float32", "int32"}, true, false},
      {"barrier and all_reduce",
       [](DataChannel& dc, int rank, const CollectiveOptions& o) {
         Tensor t = Tensor::ones({16}, kFloat32);
         if (rank == 0) dc.barrier(o);
         else dc.all_reduce(t, ReduceOp::Sum, o);
       },
       {"barrier", "all_reduce(float32, 16 elements"}, false, false},
      // With thd's own algorithms two ranks that each think they are the root
      // only send; the library's agreement catches it before any data moves.
      {"roots",
       [](DataChannel& dc, int rank, const CollectiveOptions& o) {
         Tensor t = Tensor::ones({1024}, kFloat32);
         dc.broadcast(t, rank, o);
       },
       {"root 0", "root 1"}, false, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    if (c.mpi_only && backend() != "mpi") continue;
    // A world of its own per case: after a failed collective its tag may be unusable.
    std::vector<std::exception_ptr> outcome(2);
    bool collected = false;
    run_world(backend(), 2, [&](RankEnv& env) {
      std::exception_ptr mine;
      const milliseconds took =
          outcome_of([&] { c.call(env.dc, env.rank, {.timeout = milliseconds(1500)}); }, &mine);
      require(took < milliseconds(1500) + kSlack, "the mismatched collective took " + std::to_string(took.count()) +
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

// Rank 0 calls `call` with a 300 ms deadline, rank 1 the same 800 ms later with a
// long one: rank 0 times out, and rank 1 is not left hanging. Over mpi, whose
// collective cannot be withdrawn, rank 0 finishes it once rank 1 comes, with the
// data rank 0 was given: `check` then checks rank 1's result. thd's own
// algorithms may fail the late call.
void late_rank_case(const std::string& backend, const std::string& what,
                    const std::function<void(DataChannel&, int rank, const CollectiveOptions&)>& call,
                    const std::function<void(int rank)>& check) {
  run_world(backend, 2, [&](RankEnv& env) {
    if (env.rank == 0) {
      const milliseconds took = time_of([&] {
        require_throws<TimeoutError>([&] { call(env.dc, 0, {.timeout = milliseconds(300)}); }, {},
                                     "a " + what + " rank 1 joins too late");
      });
      require(took < milliseconds(300) + kSlack, "the timed-out " + what + " took " + std::to_string(took.count()) +
                                                     " ms to fail");
      check(0);
    } else {
      std::this_thread::sleep_for(milliseconds(800));
      std::exception_ptr late;
      const milliseconds took = outcome_of([&] { call(env.dc, 1, {.timeout = milliseconds(3000)}); }, &late);
      require(took < milliseconds(3000) + kSlack, "the late " + what + " took " + std::to_string(took.count()) + " ms");
      if (env.dc.backend() == "mpi") {
        require(late == nullptr, "the late rank's " + what + " failed: " + describe(late));
        check(1);
      }
    }
    // Another tag still works for both.
    Tensor again = Tensor::full({8}, 1, kInt32);
    env.dc.all_reduce(again, ReduceOp::Sum, {.tag = 9, .timeout = milliseconds(10000)});
    require_same(again, Tensor::full({8}, 2, kInt32), "an all_reduce on another tag after the timeout");
  });
}

TEST_P(DefaultTag, ALateRankTimesTheOtherOutAndIsNotLeftHanging) {
  {
    SCOPED_TRACE("all_reduce");
    Tensor t[2] = {Tensor::full({256}, 1, kFloat32), Tensor::full({256}, 2, kFloat32)};
    late_rank_case(
        backend(), "all_reduce", [&](DataChannel& dc, int rank, const CollectiveOptions& o) {
          dc.all_reduce(t[rank], ReduceOp::Sum, o);
        },
        [&](int rank) {
          // The caller's tensor is never written after the error.
          require_same(t[rank], Tensor::full({256}, rank == 0 ? 1 : 3, kFloat32), "the all_reduce's tensor");
        });
  }
  {
    SCOPED_TRACE("broadcast");
    // From the late rank: the other waits for its data whoever runs the broadcast
    // (thd's root would be done as soon as its sends are).
    Tensor t[2] = {Tensor::full({1024}, 0, kInt32), Tensor::full({1024}, 4, kInt32)};
    late_rank_case(
        backend(), "broadcast", [&](DataChannel& dc, int rank, const CollectiveOptions& o) { dc.broadcast(t[rank], 1, o); },
        [&](int rank) {
          require_same(t[rank], Tensor::full({1024}, rank == 0 ? 0 : 4, kInt32), "the broadcast's tensor");
        });
  }
  {
    SCOPED_TRACE("all_gather");
    Tensor out[2] = {Tensor::full({512}, -1, kInt32), Tensor::full({512}, -1, kInt32)};
    late_rank_case(
        backend(), "all_gather",
        [&](DataChannel& dc, int rank, const CollectiveOptions& o) {
          dc.all_gather(out[rank], Tensor::full({256}, rank + 1, kInt32), o);
        },
        [&](int rank) {
          // thd's own ring writes this rank's block before it waits; MPI's path
          // writes nothing before the others have come.
          if (rank == 0 && backend() == "mpi") {
            require_same(out[0], Tensor::full({512}, -1, kInt32), "the timed-out all_gather's output");
          }
          if (rank == 1) {
            require_same(out[1], cat({Tensor::full({256}, 1, kInt32), Tensor::full({256}, 2, kInt32)}),
                         "the late all_gather's output");
          }
        });
  }
  {
    // Given up on, these finish in place in their stage (MPI_IN_PLACE).
    SCOPED_TRACE("all_to_all");
    Tensor out[2] = {Tensor::full({512}, -1, kInt32), Tensor::full({512}, -1, kInt32)};
    late_rank_case(
        backend(), "all_to_all",
        [&](DataChannel& dc, int rank, const CollectiveOptions& o) {
          dc.all_to_all(out[rank], cat({Tensor::full({256}, 10 * rank, kInt32), Tensor::full({256}, 10 * rank + 1,
                                                                                               kInt32)}),
                        o);
        },
        [&](int rank) {
          if (rank == 0 && backend() == "mpi") {
            require_same(out[0], Tensor::full({512}, -1, kInt32), "the timed-out all_to_all's output");
          }
          if (rank == 1) {
            require_same(out[1], cat({Tensor::full({256}, 1, kInt32), Tensor::full({256}, 11, kInt32)}),
                         "the late all_to_all's output");
          }
        });
  }
  {
    SCOPED_TRACE("reduce_scatter");
    Tensor out[2] = {Tensor::full({64}, -1, kInt64), Tensor::full({64}, -1, kInt64)};
    late_rank_case(
        backend(), "reduce_scatter",
        [&](DataChannel& dc, int rank, const CollectiveOptions& o) {
          dc.reduce_scatter(out[rank], Tensor::full({128}, rank + 1, kInt64), ReduceOp::Sum, o);
        },
        [&](int rank) {
          if (rank == 0 && backend() == "mpi") {
            require_same(out[0], Tensor::full({64}, -1, kInt64), "the timed-out reduce_scatter's output");
          }
          if (rank == 1) require_same(out[1], Tensor::full({64}, 3, kInt64), "the late reduce_scatter's output");
        });
  }
  {
    SCOPED_TRACE("barrier");
    late_rank_case(
        backend(), "barrier", [](DataChannel& dc, int, const CollectiveOptions& o) { dc.barrier(o); },
        [](int) {});
  }
}

}  // namespace

THD_CONFORMANCE_BACKENDS(DefaultTag);

}  // namespace thd::conformance
