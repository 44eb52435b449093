// thd's quickstart on GPUs: the master drives tensors that live on its workers' GPUs.
//
//   thdrun -n 3 build/examples/quickstart_cuda     # the master + 2 workers (nodes 0, 1)
//
// Device::cuda(i) is GPU i of the node a tensor lives on. Creation, uploads and
// ops run there; get() brings the bytes back to the master's host memory; to_node
// and collectives move GPU tensors between workers through host memory. Every line
// prints a value computed on the workers' GPUs next to the value expected; the
// program exits non-zero if any differ, and with 77 (ctest's "skipped") and a
// message saying so when a worker has no GPU.
#include <thd/thd.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

bool all_ok = true;

void report(const char* what, double got, double expected) {
  const bool ok = std::fabs(got - expected) <= 1e-3 * (1.0 + std::fabs(expected));
  all_ok = all_ok && ok;
  std::printf("  %-46s = %g (expected %g)%s\n", what, got, expected, ok ? "" : "  <-- WRONG");
}

}  // namespace

int main(int argc, char** argv) {
  thd::init_master_worker({.backend = thd::backend_from_args(argc, argv)});
  const int nodes = thd::num_nodes();
  // Each worker says how many GPUs it can use (thd::stats asks every node).
  for (const thd::NodeStats& s : thd::stats()) {
    if (s.cuda_devices == 0) {
      std::printf("thd CUDA quickstart: node %d has no GPU (its worker sees no CUDA device, or was built without "
                  "CUDA); run it on a machine with a GPU. Nothing to do.\n",
                  s.node);
      thd::shutdown();
      return 77;
    }
  }
  std::printf("thd CUDA quickstart: a master and %d worker nodes, each with a GPU\n\n", nodes);

  // A tensor made on node 0's GPU 0, filled there.
  auto x = thd::DistributedFloatTensor({20, 20}, thd::Device::cuda(0)).fill_(4);
  // A local tensor uploaded to node 0 and moved to its GPU (.cuda()).
  thd::Tensor local_y = thd::Tensor::arange(400, thd::kFloat32).view({20, 20});
  auto y = local_y.dist_send().cuda();
  // Async: returns at once; the worker's GPU computes while the master goes on.
  auto z = x + y * 2;
  report("z = x + 2y on node 0's GPU; z.sum()", z.sum().item<double>(), 4 * 400 + 2 * (399 * 400 / 2));
  report("z.device() is cuda:0", z.device() == thd::Device::cuda(0), 1);
  report("z.matmul(z.t()) trace (diagonal sum)",
         (z.matmul(z.t()) * thd::DistributedTensor::eye(20, -1, thd::kFloat32, thd::Device::cuda(0))).sum().item<double>(),
         (local_y * 2 + 4).pow(2).sum().item<double>());

  // `with torch.device("cuda:0"):` on node 1 — creations in the scope go to its GPU.
  if (nodes > 1) {
    thd::NodeScope on(1);
    thd::DeviceScope gpu(thd::Device::cuda(0));
    auto a = thd::DistributedFloatTensor::ones({10}) * 3;
    report("a = ones(10) * 3 on node 1's GPU; a.sum()", a.sum().item<double>(), 30);
    // A worker-to-worker copy of a GPU tensor: through host memory on both sides.
    auto z1 = z.to_node(1);
    report("z.to_node(1).mean()", z1.mean().item<double>(), (4 * 400 + 2 * (399 * 400 / 2)) / 400.0);
    report("z.to_node(1) is on node 1's cuda:0", z1.node() == 1 && z1.device() == thd::Device::cuda(0), 1);
  }

  // One GPU tensor per node, all-reduced among the workers themselves.
  std::vector<thd::DistributedTensor> grads;
  for (int n = 0; n < nodes; ++n) {
    thd::NodeScope on(n);
    grads.push_back(thd::DistributedTensor::full({1000}, n + 1, thd::kFloat32, thd::Device::cuda(0)));
  }
  thd::all_reduce(grads, thd::ReduceOp::Sum);
  const double expected = nodes * (nodes + 1) / 2.0;
  for (int n = 0; n < nodes; ++n) {
    report(("all_reduce result on node " + std::to_string(n) + ", element 7").c_str(),
           grads[n].get().to_vector<float>()[7], expected);
  }

  // A sync point: the GPU's bytes come back to the master's host memory.
  thd::Tensor back = z.cpu().get();
  report("z.cpu().get()[3][4]", back.select(0, 3).select(0, 4).item<double>(), 4 + 2 * (3 * 20 + 4));
  for (const thd::NodeStats& s : thd::stats()) {
    std::printf("  node %d: %d GPU(s), %lld KiB of tensors on cuda:0 now\n", s.node, s.cuda_devices,
                static_cast<long long>(s.devices.empty() ? 0 : s.devices[0].in_use >> 10));
  }

  thd::shutdown();
  std::printf("\n%s\n", all_ok ? "all results as expected" : "SOME RESULTS ARE WRONG");
  return all_ok ? 0 : 1;
}
