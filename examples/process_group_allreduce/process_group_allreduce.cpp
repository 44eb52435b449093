// Process-group (SPMD) mode: every rank runs this program, as with torchrun.
//
//   build/bin/thdrun -n 4 build/examples/process_group_allreduce
//
// Each rank fills a tensor with its rank, the ranks sum it with all_reduce, then
// check broadcast, all_gather and a subgroup. thdrun sets RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT and the auth token that init_process_group reads
// (env://). Exits non-zero on any wrong result, so thdrun names the rank.
#include <thd/thd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

int failures = 0;

void expect(bool ok, const char* what, int rank) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: %s is wrong\n", rank, what);
    ++failures;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // --backend NAME picks the backend (mpirun -n 4 process_group_allreduce --backend mpi);
  // without it, THD_BACKEND (thdrun --backend ucx), else tcp.
  thd::init_process_group({.backend = thd::backend_from_args(argc, argv), .init_method = "env://"});
  const int rank = thd::get_rank();
  const int world = thd::get_world_size();

  // all_reduce: every rank contributes its rank; each element becomes 0+1+...+(n-1).
  thd::Tensor t = thd::Tensor::full({1024}, rank, thd::kFloat32);
  thd::all_reduce(t, thd::ReduceOp::Sum);
  const float expected_sum = world * (world - 1) / 2.0f;
  expect(t.min().item<float>() == expected_sum && t.max().item<float>() == expected_sum, "all_reduce sum", rank);

  // The async form returns at once; wait() is the sync point.
  thd::Tensor m = thd::Tensor::full({8}, rank, thd::kInt64);
  thd::Request pending = thd::iall_reduce(m, thd::ReduceOp::Max);
  pending.wait();
  expect(m.min().item<int64_t>() == world - 1, "iall_reduce max", rank);

  // broadcast from the last rank.
  thd::Tensor b = rank == world - 1 ? thd::Tensor::arange(16, thd::kFloat64) : thd::Tensor::zeros({16}, thd::kFloat64);
  thd::broadcast(b, world - 1);
  expect(b.sum().item<double>() == 120.0, "broadcast", rank);

  // all_gather: row r of the output is rank r's input.
  thd::Tensor row = thd::Tensor::full({3}, rank * 10, thd::kInt32);
  thd::Tensor rows = thd::Tensor::empty({world, 3}, thd::kInt32);
  thd::all_gather(rows, row);
  for (int r = 0; r < world; ++r) {
    expect(rows.select(0, r).sum().item<int64_t>() == 3 * r * 10, "all_gather", rank);
  }

  // A subgroup of the even ranks runs its own all_reduce and a broadcast from its
  // last member (src is a global rank, as in torch); the odd ranks are not
  // members (get_rank(group) == -1) and skip it.
  std::vector<int> evens;
  for (int r = 0; r < world; r += 2) evens.push_back(r);
  auto even_group = thd::new_group(evens);
  if (thd::get_rank(even_group) >= 0) {
    thd::Tensor e = thd::Tensor::ones({4});
    thd::all_reduce(e, thd::ReduceOp::Sum, even_group);
    expect(e.sum().item<float>() == 4.0f * static_cast<float>(evens.size()), "subgroup all_reduce", rank);
    thd::Tensor from_last = thd::Tensor::full({2}, rank, thd::kInt32);
    thd::broadcast(from_last, evens.back(), even_group);
    expect(from_last.min().item<int64_t>() == evens.back(), "subgroup broadcast", rank);
  }

  thd::barrier();
  if (rank == 0) {
    std::printf("process_group_allreduce: %d ranks, sum of ranks = %g: %s\n", world, t.select(0, 0).item<double>(),
                failures == 0 ? "OK" : "FAILED");
  }
  thd::destroy_process_group();
  return failures == 0 ? 0 : 1;
}
