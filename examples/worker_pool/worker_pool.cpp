// A worker pool outlives its masters. This program attaches to a pool twice in a
// row; each time it puts tensors on every node, computes, checks the results and
// detaches. Each session starts with nothing of the one before left on the
// workers: the pool frees every tensor of a session when its master detaches (or
// dies).
//
// Start a pool, then attach with its address and its token:
//
//   build/bin/thdrun --pool -n 2 --listen 127.0.0.1:29600
//     thdrun: worker pool: tcp://127.0.0.1:29600 (2 nodes)
//     thdrun: token: THD_AUTH_TOKEN_FILE=/tmp/thdrun-Ab12Cd/token
//   THD_AUTH_TOKEN_FILE=/tmp/thdrun-Ab12Cd/token build/examples/worker_pool tcp://127.0.0.1:29600
//
// or let thdrun start a pool, run this program against it (THD_POOL_URL tells it
// where) and stop the pool afterwards:
//
//   build/bin/thdrun --pool -n 2 build/examples/worker_pool
//
// Exits non-zero if any result is wrong.
#include <thd/thd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

bool all_ok = true;

void report(const char* what, double got, double expected) {
  const bool ok = std::fabs(got - expected) <= 1e-6 * (1.0 + std::fabs(expected));
  all_ok = all_ok && ok;
  std::printf("  %-44s = %g (expected %g)%s\n", what, got, expected, ok ? "" : "  <-- WRONG");
}

void one_session(const std::string& pool, int round) {
  // No rank, no RANK in the environment: a tcp:// address then names a pool, and
  // this program is its master for as long as the session lasts.
  thd::init_master_worker({.init_method = pool});
  const int nodes = thd::num_nodes();
  std::printf("session %d: attached to %s (%d nodes)\n", round, pool.c_str(), nodes);

  double left = 0;
  for (uint64_t n : thd::detail::live_tensors_per_node()) left += static_cast<double>(n);
  report("tensors left on the workers from before", left, 0);

  // On node k: arange(10) * (k + 1) + round, made where it lives.
  std::vector<thd::DistributedTensor> parts;
  for (int k = 0; k < nodes; ++k) {
    thd::NodeScope on(k);
    parts.push_back(thd::DistributedTensor::arange(10, thd::kFloat32) * static_cast<float>(k + 1) +
                    static_cast<float>(round));
  }
  // Summed across the nodes by the workers themselves.
  thd::all_reduce(parts, thd::ReduceOp::Sum);
  const double weights = nodes * (nodes + 1) / 2.0;  // sum of (k + 1)
  const thd::Tensor total = parts.back().get();      // a sync point: bytes come back
  report("all_reduce(parts)[9]", total.select(0, 9).item<double>(), 9 * weights + nodes * round);
  report("sum of all_reduce(parts)", total.sum().item<double>(), 45 * weights + 10.0 * nodes * round);

  // A local tensor uploaded to node 0 and combined there.
  auto v = thd::Tensor::full({10}, 0.5f).dist_send(0);
  report("(parts[0] * 0.5).sum() on node 0", (parts.front() * v).sum().item<double>(),
         0.5 * (45 * weights + 10.0 * nodes * round));

  // Detaching while `parts` still holds tensors: the pool frees them.
  thd::shutdown();
}

}  // namespace

int main(int argc, char** argv) {
  const char* from_env = std::getenv("THD_POOL_URL");
  const std::string pool = argc > 1 ? argv[1] : from_env != nullptr ? from_env : "";
  if (pool.empty()) {
    std::fprintf(stderr, "usage: worker_pool tcp://HOST:PORT (or THD_POOL_URL set, as thdrun --pool does)\n");
    return 2;
  }
  try {
    one_session(pool, 1);
    one_session(pool, 2);
  } catch (const thd::Error& e) {
    std::fprintf(stderr, "worker_pool: %s\n", e.what());
    return 1;
  }
  std::printf("\nworker_pool: %s\n", all_ok ? "OK" : "FAILED");
  return all_ok ? 0 : 1;
}
