// Ranks that disagree: mismatched point-to-point messages, mismatched
// collectives (different ops, counts, dtypes, reduce ops), and a collective a
// peer never joins. Each must end in an error, never a hang: one naming both
// calls on at least one rank, which tells the others (every rank then names the
// mismatch at once; EveryRankNamesTheMismatchAtOnce), or a TimeoutError.
#include <gtest/gtest.h>

#include "backends.h"
#include "checks.h"
#include "op_checks.h"
#include "rank_launched.h"
#include "rank_threads.h"
#include "tensors.h"

namespace thd::conformance {
namespace {

using std::chrono::milliseconds;

// Short, so the ranks that can only time out do so quickly; long enough for the
// mismatch to be seen first on a busy machine.
constexpr milliseconds kMismatchTimeout{1500};
// How much later than its deadline a failed call may return.
constexpr milliseconds kSlack{4000};

class Mismatch : public BackendTest {};

struct MismatchCase {
  std::string name;
  // What rank `rank` calls (an i-form, so every case can be in flight at once).
  std::function<Request(DataChannel& dc, int rank, const CollectiveOptions& options)> call;
  // What the error of a rank that sees the mismatch must mention.
  std::vector<std::string> needles;
};

// Requires one outcome per rank: every rank failed; each with a TimeoutError or
// with a ValueError/TypeError naming both calls; at least one of the latter.
void check_outcomes(const MismatchCase& c, const std::vector<std::exception_ptr>& outcome) {
  int named = 0;
  for (size_t r = 0; r < outcome.size(); ++r) {
    const std::string who = c.name + ", rank " + std::to_string(r);
    if (!outcome[r]) {
      ADD_FAILURE() << who << ": succeeded, though the ranks called different collectives";
      continue;
    }
    try {
      std::rethrow_exception(outcome[r]);
    } catch (const TimeoutError&) {
    } catch (const Error& e) {
      const bool value_or_type =
          dynamic_cast<const ValueError*>(&e) != nullptr || dynamic_cast<const TypeError*>(&e) != nullptr;
      EXPECT_TRUE(value_or_type) << who << ": expected a ValueError/TypeError or a TimeoutError, got "
                                 << describe(outcome[r]);
      bool all = true;
      for (const auto& needle : c.needles) {
        if (std::string(e.what()).find(needle) == std::string::npos) all = false;
      }
      EXPECT_TRUE(all) << who << ": the error '" << e.what() << "' does not name both calls (expected it to mention "
                       << ::testing::PrintToString(c.needles) << ")";
      if (value_or_type && all) ++named;
    } catch (...) {
      ADD_FAILURE() << who << ": " << describe(outcome[r]);
    }
  }
  EXPECT_GE(named, 1) << c.name << ": no rank got an error naming both calls";
}

// Runs every case at once (each on a tag of its own), then checks that each
// failed as it must, in time, and that the channel still works.
void run_cases(const std::string& backend, int n, const std::vector<MismatchCase>& cases) {
  std::vector<std::vector<std::exception_ptr>> outcomes(cases.size(), std::vector<std::exception_ptr>(n));
  // Rank 0 collects every rank's outcomes (through the store, so launched ranks in
  // other processes count too) and this process checks them if it holds rank 0.
  bool collected = false;
  run_world(backend, n, [&](RankEnv& env) {
    std::vector<std::exception_ptr> mine(cases.size());
    std::vector<Request> reqs(cases.size());
    const auto start = std::chrono::steady_clock::now();
    for (size_t k = 0; k < cases.size(); ++k) {
      const CollectiveOptions o{.tag = static_cast<int64_t>(k) + 1, .timeout = kMismatchTimeout};
      try {
        reqs[k] = cases[k].call(env.dc, env.rank, o);
      } catch (...) {
        mine[k] = std::current_exception();
      }
    }
    for (size_t k = 0; k < cases.size(); ++k) {
      try {
        reqs[k].wait();
      } catch (...) {
        if (!mine[k]) mine[k] = std::current_exception();
      }
    }
    for (size_t k = 0; k < cases.size(); ++k) {
      auto all = share_outcomes(env, "mismatch/" + std::to_string(k), mine[k]);
      if (env.rank == 0) outcomes[k] = std::move(all);
    }
    if (env.rank == 0) collected = true;
    const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
    require(took < kMismatchTimeout + kSlack, "the mismatched collectives took " + std::to_string(took.count()) +
                                                  " ms to fail, with a timeout of " +
                                                  std::to_string(kMismatchTimeout.count()) + " ms");

    // A failed collective may leave its tag unusable: a later one there may fail,
    // but must end, and must not quietly give a wrong result.
    Tensor again = Tensor::ones({4});
    const CollectiveOptions first_tag{.tag = 1, .timeout = milliseconds(500)};
    const milliseconds again_took = time_of([&] {
      try {
        env.dc.all_reduce(again, ReduceOp::Sum, first_tag);
        require_same(again, Tensor::full({4}, env.size, kFloat32),
                     "an all_reduce that succeeded on the tag of a failed collective");
      } catch (const Error&) {
      }
    });
    require(again_took < milliseconds(500) + kSlack, "an all_reduce on the tag of a failed collective took " +
                                                         std::to_string(again_took.count()) + " ms to end");

    // Other tags, and point to point, work as before.
    check_all_reduce(env.dc, kFloat32, 6, ReduceOp::Sum, 7);
    check_send_recv_ring(env.dc, kInt32, 4, 99, 8);
  });
  if (!collected) return;  // launched ranks: rank 0's process checks
  for (size_t k = 0; k < cases.size(); ++k) check_outcomes(cases[k], outcomes[k]);
}

TEST_P(Mismatch, DifferentCollectivesAcrossRanks) {
  std::vector<MismatchCase> cases;
  cases.push_back({"all_reduce on rank 0, broadcast on rank 1",
                   [](DataChannel& dc, int rank, const CollectiveOptions& o) {
                     Tensor t = Tensor::ones({8});
                     return rank == 0 ? dc.iall_reduce(t, ReduceOp::Sum, o) : dc.ibroadcast(t, 0, o);
                   },
                   {"all_reduce", "broadcast"}});
  cases.push_back({"all_reduce of 1000 and of 1001 elements",
                   [](DataChannel& dc, int rank, const CollectiveOptions& o) {
                     Tensor t = Tensor::ones({rank == 0 ? 1000 : 1001});
                     return dc.iall_reduce(t, ReduceOp::Sum, o);
                   },
                   {"1000", "1001"}});
  cases.push_back({"all_reduce of float32 and of int32",
                   [](DataChannel& dc, int rank, const CollectiveOptions& o) {
                     Tensor t = Tensor::ones({8}, rank == 0 ? kFloat32 : kInt32);
                     return dc.iall_reduce(t, ReduceOp::Sum, o);
                   },
                   {"float32", "int32"}});
  cases.push_back({"all_reduce with sum and with max",
                   [](DataChannel& dc, int rank, const CollectiveOptions& o) {
                     Tensor t = Tensor::ones({8});
                     return dc.iall_reduce(t, rank == 0 ? ReduceOp::Sum : ReduceOp::Max, o);
                   },
                   {"sum", "max"}});
  cases.push_back({"all_gather on rank 0, all_to_all on rank 1",
                   [](DataChannel& dc, int rank, const CollectiveOptions& o) {
                     Tensor out = Tensor::zeros({8});
                     return rank == 0 ? dc.iall_gather(out, Tensor::ones({4}), o)
                                      : dc.iall_to_all(out, Tensor::ones({8}), o);
                   },
                   {"all_gather", "all_to_all"}});
  run_cases(backend(), 2, cases);
}

TEST_P(Mismatch, OneRankOfThreeDisagrees) {
  std::vector<MismatchCase> cases;
  cases.push_back({"all_reduce of 64 elements on ranks 0 and 1, of 65 on rank 2",
                   [](DataChannel& dc, int rank, const CollectiveOptions& o) {
                     Tensor t = Tensor::ones({rank == 2 ? 65 : 64}, kInt64);
                     return dc.iall_reduce(t, ReduceOp::Sum, o);
                   },
                   {"64", "65"}});
  // (Every case has every rank receive something: a rank that only sends, like a
  // leaf of a reduce, may finish before anyone notices.)
  cases.push_back({"all_gather on ranks 0 and 1, all_reduce on rank 2",
                   [](DataChannel& dc, int rank, const CollectiveOptions& o) {
                     Tensor t = Tensor::ones({6}, kFloat64);
                     Tensor out = Tensor::zeros({18}, kFloat64);
                     return rank == 2 ? dc.iall_reduce(out, ReduceOp::Sum, o) : dc.iall_gather(out, t, o);
                   },
                   {"all_gather", "all_reduce"}});
  run_cases(backend(), 3, cases);
}

// One rank calls a different collective than the other two, with a long
// deadline: the rank that sees the mismatch tells the others, so every rank fails
// at once with an error naming both calls (no rank waits out the deadline), and the
// next collective on the same tag works everywhere.
void every_rank_names_the_mismatch_at_once(const std::string& backend, bool odd_rank_alone) {
  constexpr milliseconds kLongTimeout{30000};
  constexpr milliseconds kPrompt{2000};
  constexpr int64_t kTag = 5;
  run_world(backend, 3, [&](RankEnv& env) {
    const CollectiveOptions o{.tag = kTag, .timeout = kLongTimeout};
    // Rank 1 broadcasts from rank 0; rank 0 all_reduces; rank 2 does as rank 1
    // (then rank 1's mismatch is with rank 0 alone) or as rank 0.
    const bool broadcasts = env.rank == 1 || (env.rank == 2 && !odd_rank_alone);
    constexpr std::string_view kBroadcast = "broadcast(float32, 4 elements, root 0)";
    constexpr std::string_view kAllReduce = "all_reduce(float32, 4 elements, sum)";
    const std::string theirs = broadcasts ? std::string(kAllReduce) : std::string(kBroadcast);
    const std::string mine = broadcasts ? std::string(kBroadcast) : std::string(kAllReduce);
    Tensor t = Tensor::ones({4});
    std::exception_ptr error;
    const milliseconds took = time_of([&] {
      try {
        broadcasts ? env.dc.broadcast(t, 0, o) : env.dc.all_reduce(t, ReduceOp::Sum, o);
      } catch (...) {
        error = std::current_exception();
      }
    });
    const std::string who = "rank " + std::to_string(env.rank);
    const std::string both = "called " + theirs + " while this rank called " + mine;
    require_error<ValueError>(error, {"collectives do not match", both}, who + " of a mismatched collective");
    require(took < kPrompt, who + " took " + std::to_string(took.count()) + " ms to fail a mismatched collective " +
                                "with a deadline of " + std::to_string(kLongTimeout.count()) + " ms");

    Tensor again = Tensor::full({4}, static_cast<double>(env.rank), kFloat32);
    env.dc.all_reduce(again, ReduceOp::Sum, {.tag = kTag, .timeout = milliseconds(10000)});
    require_same(again, Tensor::full({4}, 3.0, kFloat32), "the all_reduce after a mismatched collective");
  });
}

TEST_P(Mismatch, EveryRankNamesTheMismatchAtOnce) { every_rank_names_the_mismatch_at_once(backend(), true); }

TEST_P(Mismatch, EveryRankNamesTheMismatchAtOnceWhenTwoDisagreeWithOne) {
  every_rank_names_the_mismatch_at_once(backend(), false);
}

TEST_P(Mismatch, PointToPointSizeAndDtype) {
  run_world(backend(), 2, [](RankEnv& env) {
    const P2POptions size_tag{.tag = 1, .timeout = kMismatchTimeout};
    const P2POptions dtype_tag{.tag = 2, .timeout = kMismatchTimeout};
    const P2POptions bytes_tag{.tag = 3, .timeout = kMismatchTimeout};
    if (env.rank == 0) {
      std::vector<Request> sent{env.dc.isend(Tensor::ones({11}), 1, size_tag),
                                env.dc.isend(Tensor::ones({4}, kInt32), 1, dtype_tag)};
      std::vector<uint8_t> ten(10);
      sent.push_back(env.dc.isend_bytes(ten, 1, bytes_tag));
      // The sends may complete or fail (the receiver refused them); they must end.
      for (const Request& r : sent) {
        try {
          r.wait();
        } catch (const Error&) {
        }
      }
    } else {
      Tensor thirteen = Tensor::zeros({13});
      require_throws<ValueError>([&] { env.dc.recv(thirteen, 0, size_tag); }, {"11", "13"},
                                 "recv of 13 float32 when 11 were sent");
      Tensor floats = Tensor::zeros({4});
      require_throws<TypeError>([&] { env.dc.recv(floats, 0, dtype_tag); }, {"int32", "float32"},
                                "recv of float32 when int32 was sent");
      std::vector<uint8_t> twelve(12);
      require_throws<ValueError>([&] { env.dc.recv_bytes(twelve, 0, bytes_tag); }, {"10", "12"},
                                 "recv_bytes of 12 bytes when 10 were sent");
    }
    check_send_recv_ring(env.dc, kFloat32, 5, 4, 9);
  });
}

TEST_P(Mismatch, CollectiveTimesOutWhenAPeerNeverJoins) {
  run_world(backend(), 2, [](RankEnv& env) {
    if (env.rank == 0) {
      Tensor t = Tensor::ones({4});
      const milliseconds took = time_of([&] {
        require_throws<TimeoutError>(
            [&] { env.dc.all_reduce(t, ReduceOp::Sum, {.tag = 3, .timeout = milliseconds(300)}); }, {"all_reduce"},
            "all_reduce that rank 1 never joins");
      });
      require(took >= milliseconds(250) && took < milliseconds(300) + kSlack,
              "all_reduce with a 300 ms timeout failed after " + std::to_string(took.count()) + " ms");
    }
    env.sync.arrive_and_wait();
    check_all_reduce(env.dc, kInt64, 3, ReduceOp::Sum, 10);
  });
}

THD_CONFORMANCE_BACKENDS(Mismatch);

}  // namespace
}  // namespace thd::conformance
