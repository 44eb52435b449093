// Graphs (docs/graphs.md): a data-parallel training step on every node (a linear
// model's forward and backward, an all_reduce of the gradients, the update),
// captured once and replayed, one command per node per step, next to the same step
// issued eagerly on a copy of the weights. Both must give the very same weights.
//
//   thdrun -n 4 build/examples/graph_replay      # the master + 3 workers
#include <thd/thd.h>

#include <chrono>
#include <cstdio>
#include <vector>

namespace {

constexpr int64_t kBatch = 16, kIn = 32, kOut = 8;
constexpr int kSteps = 50;
constexpr float kLr = 0.01f;

struct Replica {
  thd::DistributedTensor x, target, w;  // one node's data and its copy of the weights
};

// One step on every node: forward, backward, gradients averaged, update in place.
void step(std::vector<Replica>& replicas) {
  std::vector<thd::DistributedTensor> grads;
  for (size_t n = 0; n < replicas.size(); ++n) {
    thd::NodeScope on(static_cast<int>(n));
    Replica& r = replicas[n];
    thd::DistributedTensor err = r.x.matmul(r.w) - r.target;
    grads.push_back(r.x.t().matmul(err).div(static_cast<double>(kBatch * static_cast<int64_t>(replicas.size()))));
  }
  thd::all_reduce(grads, thd::ReduceOp::Sum);
  for (size_t n = 0; n < replicas.size(); ++n) {
    thd::NodeScope on(static_cast<int>(n));
    replicas[n].w.sub_(grads[n] * kLr);
  }
}

std::vector<Replica> make_replicas(int nodes) {
  std::vector<Replica> out;
  thd::Tensor w0 = thd::Tensor::full({kIn, kOut}, 0.1f);
  for (int n = 0; n < nodes; ++n) {
    thd::Tensor x = thd::Tensor::arange(0, kBatch * kIn, 1, thd::kFloat32).view({kBatch, kIn}).div(1000.0 * (n + 1));
    thd::Tensor target = thd::Tensor::ones({kBatch, kOut});
    out.push_back({x.dist_send(n), target.dist_send(n), w0.dist_send(n)});
  }
  return out;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main() {
  thd::init_master_worker();
  const int nodes = thd::num_nodes();
  std::vector<Replica> graphed = make_replicas(nodes);
  std::vector<Replica> eager = make_replicas(nodes);

  thd::Graph g = thd::capture([&] { step(graphed); });  // nothing runs here
  std::printf("captured a step of %zu ops on %zu nodes\n", g.num_ops(), g.nodes().size());

  auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < kSteps; ++s) g.replay();
  thd::synchronize();
  const double graph_ms = ms_since(t0);

  t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < kSteps; ++s) step(eager);
  thd::synchronize();
  const double eager_ms = ms_since(t0);

  bool ok = true;
  for (int n = 0; n < nodes; ++n) {
    const thd::Tensor a = graphed[static_cast<size_t>(n)].w.get();
    const thd::Tensor b = eager[static_cast<size_t>(n)].w.get();
    const bool same = a.to_vector<float>() == b.to_vector<float>();  // the same kernels on the same data
    ok = ok && same;
    std::printf("  node %d: weights after %d replayed steps %s the eager ones (w[0][0] = %g)\n", n, kSteps,
                same ? "equal" : "DIFFER FROM", static_cast<double>(a.to_vector<float>()[0]));
  }
  std::printf("%d steps: replayed %.2f ms, eager %.2f ms; the graph's own tensors hold %zu bytes on node 0\n", kSteps,
              graph_ms, eager_ms, g.memory_bytes(0));
  g.reset();
  thd::shutdown();
  std::printf(ok ? "graph_replay: OK\n" : "graph_replay: FAILED\n");
  return ok ? 0 : 1;
}
