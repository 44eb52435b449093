// Placing work on nodes: thd::NodeScope is the C++ form of
// `with torch.distributed.node(i):`. Scopes nest and are per thread; tensors made
// inside live on the scope's node, ops run where their operands are, and
// t.to_node(k) copies a tensor straight from its worker to node k's.
//
//   thdrun -n 4 build/examples/node_scope      # the master + 3 workers
#include <thd/thd.h>

#include <cstdio>
#include <thread>
#include <vector>

namespace {

bool all_ok = true;

void check(const char* what, double got, double expected) {
  const bool ok = got == expected;
  all_ok = all_ok && ok;
  std::printf("  %-50s = %g (expected %g)%s\n", what, got, expected, ok ? "" : "  <-- WRONG");
}

}  // namespace

int main() {
  thd::init_master_worker();
  const int nodes = thd::num_nodes();
  std::printf("node_scope: %d nodes\n", nodes);

  auto on_default = thd::DistributedTensor::arange(10, thd::kFloat32);
  check("a tensor made outside any scope lives on node", on_default.node(), 0);
  {
    thd::NodeScope outer(nodes - 1);
    auto a = thd::DistributedTensor::full({4}, 2.5);
    check("inside NodeScope(last): node", a.node(), nodes - 1);
    {
      thd::NodeScope inner(0);
      check("nested NodeScope(0): node", thd::DistributedTensor::zeros({1}).node(), 0);
    }
    check("after the nested scope closes: node", thd::DistributedTensor::zeros({1}).node(), nodes - 1);
    // Results live with their operands, whatever the current scope.
    check("(a * 2) computed on a's node", (a * 2).node(), nodes - 1);
  }

  // Mixing nodes in one op is an error at the call site, naming both nodes.
  if (nodes > 1) {
    thd::NodeScope on(1);
    auto b = thd::DistributedTensor::ones({10});
    try {
      (void)(on_default + b);
      check("mixing nodes threw", 0, 1);
    } catch (const thd::ValueError& e) {
      std::printf("  mixing nodes 0 and 1 threw, as it should:\n    %s\n", e.what());
    }
    // The fix the message suggests: copy worker-to-worker, then compute.
    auto moved = on_default.to_node(1);
    check("(arange(10).to_node(1) + ones).sum()", (moved + b).sum().item<double>(), 45 + 10);
  }

  // Scopes are per thread: each thread places its own work.
  std::vector<double> sums(nodes);
  std::vector<std::thread> threads;
  for (int n = 0; n < nodes; ++n) {
    threads.emplace_back([n, &sums] {
      thd::NodeScope on(n);
      sums[n] = thd::DistributedTensor::full({100}, n).sum().item<double>();
    });
  }
  for (auto& t : threads) t.join();
  for (int n = 0; n < nodes; ++n) check(("thread of node " + std::to_string(n) + ": sum").c_str(), sums[n], 100.0 * n);

  thd::shutdown();
  std::printf("%s\n", all_ok ? "all results as expected" : "SOME RESULTS ARE WRONG");
  return all_ok ? 0 : 1;
}
