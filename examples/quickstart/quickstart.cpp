// thd's quickstart: a master drives tensors that live on worker processes.
//
//   thdrun -n 4 build/examples/quickstart      # the master + 3 workers (nodes 0..2)
//   thdrun -n 4 --backend ucx build/examples/quickstart
//   mpirun -n 4 build/examples/quickstart --backend mpi
//
// Rank 0 returns from init_master_worker as the master; the other ranks serve as
// workers and exit when the master shuts down. Every line prints a value computed
// on the workers next to the value expected; the program exits non-zero if any
// differ.
#include <thd/thd.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

bool all_ok = true;

void report(const char* what, double got, double expected) {
  const bool ok = std::fabs(got - expected) <= 1e-4 * (1.0 + std::fabs(expected));
  all_ok = all_ok && ok;
  std::printf("  %-44s = %g (expected %g)%s\n", what, got, expected, ok ? "" : "  <-- WRONG");
}

}  // namespace

int main(int argc, char** argv) {
  // The backend: --backend NAME (mpirun -n 4 quickstart --backend mpi), else thdrun's
  // --backend, else tcp. Ranks > 0 serve here and never return.
  thd::init_master_worker({.backend = thd::backend_from_args(argc, argv)});
  const int nodes = thd::num_nodes();
  std::printf("thd quickstart: a master and %d worker nodes\n\n", nodes);

  // A tensor on node 0 (the default), filled there: no bytes leave the master.
  auto x = thd::DistributedFloatTensor({20, 20}).fill_(4);
  // A local tensor uploaded to node 0.
  thd::Tensor local_y = thd::Tensor::arange(400, thd::kFloat32).view({20, 20});
  auto y = local_y.dist_send();
  // Async: returns at once; the worker computes while the master goes on.
  auto z = x + y * 2;
  report("z = x + 2y on node 0; z.sum()", z.sum().item<double>(), 4 * 400 + 2 * (399 * 400 / 2));

  // `with node(1):` — tensors made in the scope live on node 1.
  if (nodes > 1) {
    thd::NodeScope on(1);
    auto a = thd::DistributedFloatTensor::ones({10}) * 3;
    report("a = ones(10) * 3 on node 1; a.sum()", a.sum().item<double>(), 30);
    report("a.node()", a.node(), 1);
    // A worker-to-worker copy: node 0's z goes straight to node 1.
    auto z1 = z.to_node(1);
    report("z.to_node(1).mean()", z1.mean().item<double>(), (4 * 400 + 2 * (399 * 400 / 2)) / 400.0);
  }

  // One tensor per node, all-reduced among the workers themselves.
  std::vector<thd::DistributedTensor> grads;
  for (int n = 0; n < nodes; ++n) {
    thd::NodeScope on(n);
    grads.push_back(thd::DistributedTensor::full({1000}, n + 1));
  }
  thd::all_reduce(grads, thd::ReduceOp::Sum);
  const double expected = nodes * (nodes + 1) / 2.0;
  for (int n = 0; n < nodes; ++n) {
    report(("all_reduce result on node " + std::to_string(n) + ", element 7").c_str(),
           grads[n].get().to_vector<float>()[7], expected);
  }

  // A sync point: z's bytes come back to the master.
  thd::Tensor local = z.get();
  report("z.get()[3][4]", local.select(0, 3).select(0, 4).item<double>(), 4 + 2 * (3 * 20 + 4));

  thd::shutdown();
  std::printf("\n%s\n", all_ok ? "all results as expected" : "SOME RESULTS ARE WRONG");
  return all_ok ? 0 : 1;
}
