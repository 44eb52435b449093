// Async collectives: several outstanding at once, completing in issue order;
// Request::test/wait/wait(timeout) on collectives; collectives with different
// tags running concurrently from two threads; a thread count that does not grow
// with the tags.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "backends.h"
#include "checks.h"
#include "op_checks.h"
#include "rank_threads.h"
#include "tensors.h"
#include "thread_count.h"

namespace thd::conformance {
namespace {

using std::chrono::milliseconds;

class Async : public BackendTest {};

TEST(Request, DefaultConstructedIsComplete) {
  Request r;
  EXPECT_TRUE(r.test());
  EXPECT_NO_THROW(r.wait());
  EXPECT_NO_THROW(r.wait(milliseconds(1)));
  EXPECT_EQ(r.wait_for(milliseconds(1)), WaitStatus::Ready);
  EXPECT_EQ(r.source(), -1);
  EXPECT_EQ(r.bytes(), 0u);
  EXPECT_EQ(r.error(), nullptr);
  std::vector<Request> none;
  EXPECT_NO_THROW(wait_all(none));
}

TEST_P(Async, OutstandingCollectivesCompleteInIssueOrder) {
  run_world(backend(), 3, [](RankEnv& env) {
    DataChannel& dc = env.dc;
    const int n = env.size;
    const int r = env.rank;
    const int last = n - 1;
    // Two all_reduces of one tensor: only in issue order is the result n times
    // the first sum.
    const Tensor operand = reduce_operand(ReduceOp::Sum, kInt64, r, n, 11, 1);
    const Tensor first_sum = reduce_reference(ReduceOp::Sum, kInt64, n, 11, 1);
    Tensor twice = operand.clone();
    Tensor bcast = r == last ? pattern(kFloat32, 9, seed_of(last, 2)) : sentinel(kFloat32, {9});
    Tensor gathered = sentinel(kInt32, {n, 5});
    const Tensor gather_in = pattern(kInt32, 5, seed_of(r, 3));
    Tensor scattered = sentinel(kFloat64, {4});
    Tensor scatter_in = r == 0 ? pattern(kFloat64, 4 * n, 4) : Tensor();
    Tensor a2a_out = sentinel(kUInt8, {n * 2});
    const Tensor a2a_in = pattern(kUInt8, n * 2, seed_of(r, 5));
    Tensor rs_out = sentinel(kFloat32, {3});
    const Tensor rs_in = reduce_operand(ReduceOp::Max, kFloat32, r, n, 3 * n, 6);
    Tensor reduced = reduce_operand(ReduceOp::Min, kInt32, r, n, 6, 7);

    std::vector<Request> reqs;
    reqs.push_back(dc.iall_reduce(twice));
    reqs.push_back(dc.iall_reduce(twice));
    reqs.push_back(dc.ibroadcast(bcast, last));
    reqs.push_back(dc.iall_gather(gathered, gather_in));
    reqs.push_back(dc.iscatter(scattered, scatter_in, 0));
    reqs.push_back(dc.iall_to_all(a2a_out, a2a_in));
    reqs.push_back(dc.ireduce_scatter(rs_out, rs_in, ReduceOp::Max));
    reqs.push_back(dc.ireduce(reduced, 0, ReduceOp::Min));
    reqs.push_back(dc.ibarrier());

    // The last one done means every one before it is done.
    reqs.back().wait();
    for (size_t i = 0; i + 1 < reqs.size(); ++i) {
      require(reqs[i].test(), "collective " + std::to_string(i) +
                                  " is not finished though the collective issued after it (the last) is");
    }
    wait_all(reqs);

    require_same(twice, first_sum * n, "two outstanding all_reduces of one tensor");
    require_same(bcast, pattern(kFloat32, 9, seed_of(last, 2)), "ibroadcast");
    std::vector<Tensor> parts;
    for (int j = 0; j < n; ++j) parts.push_back(pattern(kInt32, 5, seed_of(j, 3)));
    require_same(gathered, cat(parts, 0), "iall_gather");
    require_same(scattered, pattern(kFloat64, 4 * n, 4).slice(0, 4 * r, 4 * r + 4), "iscatter");
    std::vector<Tensor> a2a_expected;
    for (int j = 0; j < n; ++j) a2a_expected.push_back(pattern(kUInt8, n * 2, seed_of(j, 5)).slice(0, 2 * r, 2 * r + 2));
    require_same(a2a_out, cat(a2a_expected, 0), "iall_to_all");
    require_same(rs_out, reduce_reference(ReduceOp::Max, kFloat32, n, 3 * n, 6).slice(0, 3 * r, 3 * r + 3),
                 "ireduce_scatter");
    if (r == 0) require_same(reduced, reduce_reference(ReduceOp::Min, kInt32, n, 6, 7), "ireduce");
  });
}

TEST_P(Async, CollectiveRequestCanBeWaitedForWithATimeoutAndAgain) {
  run_world(backend(), 2, [](RankEnv& env) {
    if (env.rank == 1) {
      env.sync.arrive_and_wait();  // until rank 0 has seen its barrier pending
      env.dc.barrier();
      return;
    }
    Request r = env.dc.ibarrier();
    require(!r.test(), "ibarrier finished before the other rank entered the barrier");
    require_throws<TimeoutError>([&] { r.wait(milliseconds(50)); }, {"barrier"},
                                 "Request::wait(50 ms) of an ibarrier the other rank has not entered");
    require(!r.test(), "ibarrier finished after wait(timeout), before the other rank entered the barrier");
    require(r.wait_for(milliseconds(20)) == WaitStatus::Timeout,
            "Request::wait_for(20 ms) of an ibarrier the other rank has not entered said Ready");
    env.sync.arrive_and_wait();
    r.wait();
    require(r.test() && r.error() == nullptr, "ibarrier: test() false or error() set after wait() returned");
  });
}

TEST_P(Async, CollectivesWithDifferentTagsRunConcurrentlyFromTwoThreads) {
  constexpr int kRounds = 15;
  run_world(backend(), 3, [](RankEnv& env) {
    std::exception_ptr errors[2];
    // Thread 0 runs all_reduces on tag 1 while thread 1 runs all_gathers and
    // broadcasts on tag 2; the two sequences interleave differently on each rank.
    std::thread a([&] {
      try {
        for (int i = 0; i < kRounds; ++i) {
          Tensor t = reduce_operand(ReduceOp::Sum, kInt64, env.rank, env.size, 17, 100 + i);
          env.dc.all_reduce(t, ReduceOp::Sum, {.tag = 1});
          require_same(t, reduce_reference(ReduceOp::Sum, kInt64, env.size, 17, 100 + i),
                       "all_reduce on tag 1, round " + std::to_string(i));
        }
      } catch (...) {
        errors[0] = std::current_exception();
      }
    });
    std::thread b([&] {
      try {
        for (int i = 0; i < kRounds; ++i) {
          if (env.rank == i % env.size) std::this_thread::sleep_for(milliseconds(2));
          Tensor out = sentinel(kFloat32, {env.size, 13});
          env.dc.all_gather(out, pattern(kFloat32, 13, seed_of(env.rank, 200 + i)), {.tag = 2});
          std::vector<Tensor> parts;
          for (int j = 0; j < env.size; ++j) parts.push_back(pattern(kFloat32, 13, seed_of(j, 200 + i)));
          require_same(out, cat(parts, 0), "all_gather on tag 2, round " + std::to_string(i));
          const int root = i % env.size;
          Tensor t = env.rank == root ? pattern(kInt32, 8, seed_of(root, 300 + i)) : sentinel(kInt32, {8});
          env.dc.broadcast(t, root, {.tag = 2});
          require_same(t, pattern(kInt32, 8, seed_of(root, 300 + i)), "broadcast on tag 2, round " + std::to_string(i));
        }
      } catch (...) {
        errors[1] = std::current_exception();
      }
    });
    a.join();
    b.join();
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  });
}

TEST_P(Async, TagsAreIndependentSequencesWhateverTheIssueOrder) {
  run_world(backend(), 2, [](RankEnv& env) {
    Tensor x = reduce_operand(ReduceOp::Sum, kFloat32, env.rank, env.size, 5, 1);
    Tensor y = reduce_operand(ReduceOp::Sum, kFloat32, env.rank, env.size, 5, 2);
    // Rank 0 issues tag 1 then tag 2; rank 1 the other way round.
    std::vector<Request> reqs;
    if (env.rank == 0) {
      reqs.push_back(env.dc.iall_reduce(x, ReduceOp::Sum, {.tag = 1}));
      reqs.push_back(env.dc.iall_reduce(y, ReduceOp::Sum, {.tag = 2}));
    } else {
      reqs.push_back(env.dc.iall_reduce(y, ReduceOp::Sum, {.tag = 2}));
      reqs.push_back(env.dc.iall_reduce(x, ReduceOp::Sum, {.tag = 1}));
    }
    wait_all(reqs);
    require_same(x, reduce_reference(ReduceOp::Sum, kFloat32, env.size, 5, 1), "all_reduce on tag 1");
    require_same(y, reduce_reference(ReduceOp::Sum, kFloat32, env.size, 5, 2), "all_reduce on tag 2");
  });
}

// Async collectives of every tag advance on the process's collective engine: the
// process has as many threads after async collectives on 64 tags as after one tag.
TEST_P(Async, ThreadCountStaysFlatAsTagsGrow) {
  const auto threads_after = [&](int tags) {
    std::atomic<size_t> counted{0};
    run_world(backend(), 2, [&](RankEnv& env) {
      std::vector<Tensor> tensors;
      std::vector<Request> reqs;
      for (int tag = 1; tag <= tags; ++tag) {
        tensors.push_back(reduce_operand(ReduceOp::Sum, kInt64, env.rank, env.size, 7, tag));
        reqs.push_back(env.dc.iall_reduce(tensors.back(), ReduceOp::Sum, {.tag = tag}));
      }
      wait_all(reqs);
      for (int tag = 1; tag <= tags; ++tag) {
        require_same(tensors[static_cast<size_t>(tag - 1)], reduce_reference(ReduceOp::Sum, kInt64, env.size, 7, tag),
                     "iall_reduce on tag " + std::to_string(tag));
      }
      // Counted while every rank's channel, and every queue of its tags, is open.
      env.sync.arrive_and_wait();
      if (env.rank == 0) counted = test::thread_count();
      env.sync.arrive_and_wait();
    });
    return counted.load();
  };
  const size_t one_tag = threads_after(1);
  const size_t many_tags = threads_after(64);
  RecordProperty("threads_after_1_tag", static_cast<int>(one_tag));
  RecordProperty("threads_after_64_tags", static_cast<int>(many_tags));
  // A thread or two may start on its own schedule; a thread per tag would be 63 more
  // per rank of the process.
  EXPECT_LE(many_tags, one_tag + 2) << "threads after async collectives on 1 tag: " << one_tag
                                    << ", on 64 tags: " << many_tags;
}

THD_CONFORMANCE_BACKENDS(Async);

}  // namespace
}  // namespace thd::conformance
