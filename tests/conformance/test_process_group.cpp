// Process-group (SPMD) mode: thd::init_process_group and the free functions on
// the default group, with ranks as forked processes (the default group is
// per-process state, so each rank is a process of its own here).
#include <gtest/gtest.h>

#include <thd/process_group.h>

#include "backends.h"
#include "checks.h"
#include "op_checks.h"
#include "rank_processes.h"
#include "tensors.h"

namespace thd::conformance {
namespace {

using std::chrono::milliseconds;

constexpr int kRanks = 3;

class ProcessGroupMode : public ForkedRanksTest {};

ProcessGroupOptions options_for(const std::string& backend, const std::string& init_method, int rank) {
  ProcessGroupOptions o;
  o.backend = backend;
  o.init_method = init_method;
  o.world_size = kRanks;
  o.rank = rank;
  o.timeout = milliseconds(15000);
  o.token = std::string(test::kToken);
  return o;
}

// The free functions, each checked against a reference.
void exercise_free_functions(int rank, uint64_t salt) {
  const int n = thd::get_world_size();
  const int last = n - 1;
  // Point to point: every rank sends to rank 0, which receives from anyone
  // (recv's default source).
  if (rank != 0) {
    thd::send(pattern(kInt32, 4, seed_of(rank, salt)), 0);
    Request r = thd::isend(pattern(kInt32, 4, seed_of(rank, salt + 1)), 0, nullptr, {.tag = 1});
    r.wait();
  } else {
    for (int i = 1; i < n; ++i) {
      Tensor got = sentinel(kInt32, {4});
      const int source = thd::recv(got);
      require(source > 0 && source < n, "thd::recv() from any rank returned source " + std::to_string(source));
      require_same(got, pattern(kInt32, 4, seed_of(source, salt)), "thd::recv() from any rank");
      Request r = thd::irecv(got, source, nullptr, {.tag = 1});
      r.wait();
      require_same(got, pattern(kInt32, 4, seed_of(source, salt + 1)), "thd::irecv()");
    }
  }
  Tensor t = reduce_operand(ReduceOp::Sum, kFloat32, rank, n, 7, salt + 2);
  thd::all_reduce(t);
  require_same(t, reduce_reference(ReduceOp::Sum, kFloat32, n, 7, salt + 2), "thd::all_reduce()");
  t = reduce_operand(ReduceOp::Max, kInt64, rank, n, 7, salt + 3);
  Request ar = thd::iall_reduce(t, ReduceOp::Max);
  ar.wait();
  require_same(t, reduce_reference(ReduceOp::Max, kInt64, n, 7, salt + 3), "thd::iall_reduce()");

  Tensor b = rank == last ? pattern(kFloat64, 5, seed_of(last, salt + 4)) : sentinel(kFloat64, {5});
  thd::broadcast(b, last);
  require_same(b, pattern(kFloat64, 5, seed_of(last, salt + 4)), "thd::broadcast()");
  Tensor ib = rank == 0 ? pattern(kUInt8, 5, seed_of(0, salt + 5)) : sentinel(kUInt8, {5});
  thd::ibroadcast(ib, 0).wait();
  require_same(ib, pattern(kUInt8, 5, seed_of(0, salt + 5)), "thd::ibroadcast()");

  Tensor red = reduce_operand(ReduceOp::Prod, kInt32, rank, n, 6, salt + 6);
  thd::reduce(red, 0, ReduceOp::Prod);
  if (rank == 0) require_same(red, reduce_reference(ReduceOp::Prod, kInt32, n, 6, salt + 6), "thd::reduce()");

  std::vector<Tensor> parts;
  for (int j = 0; j < n; ++j) parts.push_back(pattern(kFloat32, 3, seed_of(j, salt + 7)));
  Tensor gathered = sentinel(kFloat32, {n, 3});
  thd::all_gather(gathered, pattern(kFloat32, 3, seed_of(rank, salt + 7)));
  require_same(gathered, cat(parts, 0), "thd::all_gather()");
  Tensor at_root = rank == 0 ? sentinel(kFloat32, {n * 3}) : Tensor();
  thd::gather(at_root, pattern(kFloat32, 3, seed_of(rank, salt + 7)), 0);
  if (rank == 0) require_same(at_root, cat(parts, 0), "thd::gather()");
  Tensor piece = sentinel(kFloat32, {3});
  thd::scatter(piece, rank == last ? cat(parts, 0) : Tensor(), last);
  require_same(piece, parts[static_cast<size_t>(rank)], "thd::scatter()");

  Tensor rs = sentinel(kInt64, {2});
  thd::reduce_scatter(rs, reduce_operand(ReduceOp::Sum, kInt64, rank, n, 2 * n, salt + 8));
  require_same(rs, reduce_reference(ReduceOp::Sum, kInt64, n, 2 * n, salt + 8).slice(0, 2 * rank, 2 * rank + 2),
               "thd::reduce_scatter()");
  Tensor a2a = sentinel(kInt32, {n});
  thd::all_to_all(a2a, Tensor::arange(rank * n, rank * n + n).to(kInt32));
  std::vector<int32_t> expected;
  for (int j = 0; j < n; ++j) expected.push_back(j * n + rank);
  require_same(a2a, Tensor::from_vector(expected), "thd::all_to_all()");
  thd::barrier();
}

TEST_P(ProcessGroupMode, FreeFunctionsOnTheDefaultGroup) {
  const std::string b = backend();
  const uint16_t first_port = test::free_port();
  const uint16_t second_port = test::free_port();
  test::Children children;
  for (int r = 0; r < kRanks; ++r) {
    children.spawn([&, r]() -> int {
      try {
        require(!thd::is_initialized(), "is_initialized() before init_process_group()");
        require_throws<ValueError>([] { thd::get_rank(); }, {"init_process_group"}, "get_rank() before init");
        require_throws<ValueError>([] { thd::default_group(); }, {}, "default_group() before init");

        thd::init_process_group(options_for(b, "tcp://127.0.0.1:" + std::to_string(first_port), r));
        require(thd::is_initialized(), "is_initialized() after init_process_group()");
        require(thd::get_rank() == r && thd::get_world_size() == kRanks && thd::get_backend() == b,
                "get_rank/get_world_size/get_backend report rank " + std::to_string(thd::get_rank()) + " of " +
                    std::to_string(thd::get_world_size()) + " over '" + thd::get_backend() + "'");
        require_throws<ValueError>(
            [&] { thd::init_process_group(options_for(b, "tcp://127.0.0.1:" + std::to_string(first_port), r)); },
            {"already"}, "a second init_process_group()");

        exercise_free_functions(r, 100);
        std::shared_ptr<ProcessGroup> sub = thd::new_group({2, 0});
        if (sub->is_member()) exercise_every_op(*sub, 200);
        std::shared_ptr<ProcessGroup> world = thd::default_group();
        require(world->rank() == r && world->size() == kRanks, "default_group() is not the world");
        thd::barrier();

        thd::destroy_process_group();
        require(!thd::is_initialized(), "is_initialized() after destroy_process_group()");
        require_throws<ValueError>([] { thd::barrier(); }, {}, "thd::barrier() after destroy_process_group()");
        // Groups kept from before are closed too: their operations fail (and end).
        Tensor t = Tensor::ones({2});
        require_throws<Error>([&] { world->all_reduce(t, ReduceOp::Sum, {.timeout = milliseconds(2000)}); }, {},
                              "all_reduce on a kept default_group() after destroy_process_group()");
        if (sub->is_member()) {
          require_throws<Error>([&] { sub->barrier({.timeout = milliseconds(2000)}); }, {},
                                "barrier on a kept subgroup after destroy_process_group()");
        }
        world.reset();
        sub.reset();

        // And the job can be joined again.
        thd::init_process_group(options_for(b, "tcp://127.0.0.1:" + std::to_string(second_port), r));
        exercise_free_functions(r, 300);
        thd::destroy_process_group();
        return 0;
      } catch (...) {
        std::fprintf(stderr, "rank %d failed: %s\n", r, describe(std::current_exception()).c_str());
        return 1;
      }
    });
  }
  const auto codes = children.wait_all(milliseconds(60000));
  EXPECT_EQ(codes, std::vector<int>(kRanks, 0)) << describe_exit_codes(codes);
}

TEST_P(ProcessGroupMode, FileInitMethod) {
  const std::string b = backend();
  test::TempDir dir;
  const std::string init = "file://" + dir.file("rendezvous");
  test::Children children;
  for (int r = 0; r < kRanks; ++r) {
    children.spawn([&, r]() -> int {
      try {
        thd::init_process_group(options_for(b, init, r));
        exercise_free_functions(r, 400);
        thd::destroy_process_group();
        return 0;
      } catch (...) {
        std::fprintf(stderr, "rank %d failed: %s\n", r, describe(std::current_exception()).c_str());
        return 1;
      }
    });
  }
  const auto codes = children.wait_all(milliseconds(60000));
  EXPECT_EQ(codes, std::vector<int>(kRanks, 0)) << describe_exit_codes(codes);
}

// init_process_group() without a backend runs on the one the launcher chose:
// thdrun --backend NAME exports THD_BACKEND=NAME to every rank.
TEST_P(ProcessGroupMode, BackendFromTheLauncher) {
  const std::string b = backend();
  const uint16_t port = test::free_port();
  test::Children children;
  for (int r = 0; r < kRanks; ++r) {
    children.spawn([&, r]() -> int {
      try {
        ::setenv("THD_BACKEND", b.c_str(), 1);  // this child's environment, as thdrun sets it
        ProcessGroupOptions o = options_for(b, "tcp://127.0.0.1:" + std::to_string(port), r);
        o.backend = "";
        thd::init_process_group(o);
        require(thd::get_backend() == b, "init_process_group() without a backend, THD_BACKEND=" + b + ", runs on '" +
                                             thd::get_backend() + "'");
        Tensor t = Tensor::full({3}, r + 1, kInt32);
        thd::all_reduce(t);
        require_same(t, Tensor::full({3}, 1 + 2 + 3, kInt32), "all_reduce over THD_BACKEND's backend");
        thd::destroy_process_group();
        return 0;
      } catch (...) {
        std::fprintf(stderr, "rank %d failed: %s\n", r, describe(std::current_exception()).c_str());
        return 1;
      }
    });
  }
  const auto codes = children.wait_all(milliseconds(60000));
  EXPECT_EQ(codes, std::vector<int>(kRanks, 0)) << describe_exit_codes(codes);
}

THD_CONFORMANCE_BACKENDS(ProcessGroupMode);

}  // namespace
}  // namespace thd::conformance
