// Soak: several master threads drive 3 workers for a bounded time with a random mix
// of async op chains, sync points, worker-to-worker copies, collectives and
// cross-node stream waits over random shapes and dtypes. Every result is checked
// against the local tensor library, and at the end every worker's tensor memory,
// live tensors and events, and streams are back where they started.
//
// THD_SOAK_SECONDS sets the length (default 10, what scripts/test runs; the
// nightly-style run is THD_SOAK_SECONDS=60, docs/reliability.md).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <thd/distributed.h>
#include <thd/stream.h>

#include "local_job.h"
#include "remote_check.h"
#include "tensor/reference.h"

namespace thd::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kNodes = 3;
constexpr int kMasterThreads = 4;

double soak_seconds() {
  const char* s = std::getenv("THD_SOAK_SECONDS");
  if (s == nullptr || *s == '\0') return 10;
  return std::max(1.0, std::atof(s));
}

// The mix; each master thread draws one per step.
enum class Action { Chain, Copies, Collective, CrossNodeWait, Sync, kCount };
const char* action_name(Action a) {
  switch (a) {
    case Action::Chain: return "async op chain";
    case Action::Copies: return "to_node copies";
    case Action::Collective: return "collective";
    case Action::CrossNodeWait: return "cross-node stream wait";
    case Action::Sync: return "synchronize";
    case Action::kCount: break;
  }
  return "?";
}

// What the threads found: counts per action, and the first few mismatches.
struct Findings {
  std::atomic<uint64_t> done[static_cast<int>(Action::kCount)] = {};
  std::mutex mutex;
  std::vector<std::string> failures;

  void fail(const std::string& what) {
    std::lock_guard lock(mutex);
    if (failures.size() < 10) failures.push_back(what);
  }
};

// One master thread's random source and the tensors it makes.
class Driver {
 public:
  Driver(int index, Findings& findings) : rng_(0x50a4u + static_cast<uint32_t>(index) * 7919u), findings_(findings) {}

  void run(Clock::time_point deadline) {
    while (Clock::now() < deadline) {
      const auto action = static_cast<Action>(pick(0, static_cast<int>(Action::kCount) - 1));
      step(action);
      findings_.done[static_cast<int>(action)].fetch_add(1);
    }
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  Shape random_shape() {
    Shape shape(static_cast<size_t>(pick(1, 3)));
    for (auto& s : shape) s = pick(1, 24);
    return shape;
  }
  DType random_dtype() {
    static const DType dtypes[] = {kInt32, kInt64, kFloat32, kFloat64};
    return dtypes[pick(0, 3)];
  }
  Tensor sample(const Shape& shape, DType dtype) { return sample_tensor(shape, dtype, static_cast<uint32_t>(rng_())); }
  int other_node(int node) { return (node + pick(1, kNodes - 1)) % kNodes; }

  void check(const DistributedTensor& got, const Tensor& expected, int node, const char* what) {
    const auto result = matches(got, expected, node);
    if (!result) findings_.fail(std::string(what) + ": " + result.message());
  }

  void step(Action action) {
    switch (action) {
      case Action::Chain: return chain();
      case Action::Copies: return copies();
      case Action::Collective: return collective();
      case Action::CrossNodeWait: return cross_node_wait();
      case Action::Sync: return synchronize();
      case Action::kCount: break;
    }
  }

  // A few dependent async ops, some in place, then a reduction; one sync (get).
  void chain() {
    const int node = pick(0, kNodes - 1);
    const Shape shape = random_shape();
    const DType dtype = random_dtype();
    const Tensor a = sample(shape, dtype);
    const Tensor b = sample(shape, dtype);
    NodeScope on(node);
    DistributedTensor ra = a.dist_send();
    DistributedTensor rb = b.dist_send();
    DistributedTensor r = (ra + rb) * 3 - rb;
    r.add_(1);
    Tensor local = (a + b) * 3 - b;
    local.add_(1);
    if (pick(0, 1) == 0) {
      check(r.sum({0}), local.sum({0}), node, "chain sum");
    } else {
      check(r, local, node, "chain");
    }
  }

  // Around the nodes and back: each hop sent straight from worker to worker.
  void copies() {
    const int node = pick(0, kNodes - 1);
    const Tensor a = sample(random_shape(), random_dtype());
    DistributedTensor x = a.dist_send(node);
    const int hops = pick(1, 4);
    for (int i = 0; i < hops; ++i) x = x.to_node(other_node(x.node()));
    x.mul_(2);
    check(x, a * 2, x.node(), "to_node");
  }

  // One tensor per node; small integer values make every reduction order exact.
  void collective() {
    const Shape shape = random_shape();
    const DType dtype = random_dtype();
    std::vector<Tensor> local;
    std::vector<DistributedTensor> remote;
    for (int node = 0; node < kNodes; ++node) {
      local.push_back(sample(shape, dtype));
      remote.push_back(local.back().dist_send(node));
    }
    switch (pick(0, 2)) {
      case 0: {
        all_reduce(remote, ReduceOp::Sum);
        const Tensor sum = local[0] + local[1] + local[2];
        for (int node = 0; node < kNodes; ++node) check(remote[static_cast<size_t>(node)], sum, node, "all_reduce");
        break;
      }
      case 1: {
        const size_t root = static_cast<size_t>(pick(0, kNodes - 1));
        broadcast(remote, root);
        for (int node = 0; node < kNodes; ++node) check(remote[static_cast<size_t>(node)], local[root], node, "broadcast");
        break;
      }
      default: {
        const std::vector<DistributedTensor> gathered = all_gather(remote);
        const Tensor all = stack(local);
        for (int node = 0; node < kNodes; ++node) check(gathered[static_cast<size_t>(node)], all, node, "all_gather");
        break;
      }
    }
  }

  // Work on a stream of one node; a stream of another node waits on its event, then
  // receives the result and goes on with it.
  void cross_node_wait() {
    const int from = pick(0, kNodes - 1);
    const int to = other_node(from);
    const Stream producer = Stream::create(from);
    const Stream consumer = Stream::create(to, pick(0, 3) == 0 ? Stream::Priority::High : Stream::Priority::Normal);
    const Tensor a = sample(random_shape(), random_dtype());
    DistributedTensor x;
    {
      StreamScope in(producer);
      x = a.dist_send() * 2;
      x.add_(1);
    }
    Event produced = producer.record();
    consumer.wait(produced);
    DistributedTensor y;
    {
      StreamScope send_on(producer);
      StreamScope receive_on(consumer);
      y = x.to_node(to);
      y.mul_(3);
    }
    const Tensor expected = (a * 2 + 1) * 3;
    if (pick(0, 1) == 0) consumer.synchronize();
    check(y, expected, to, "cross-node wait");
  }

  std::mt19937 rng_;
  Findings& findings_;
};

// Per node: the figures that must come back to where they were.
struct Footprint {
  int64_t memory_in_use = 0;
  uint64_t live_tensors = 0;
  uint64_t live_events = 0;
  size_t streams = 0;
};

std::vector<Footprint> footprint() {
  std::vector<Footprint> f;
  for (const NodeStats& s : stats()) f.push_back({s.memory_in_use, s.live_tensors, s.live_events, s.streams.size()});
  return f;
}

TEST(Soak, MasterThreadsMixingEveryKindOfWorkGetRightResultsAndLeaveNothingBehind) {
  LocalJob job(kNodes);
  synchronize();
  const std::vector<Footprint> before = footprint();

  const double seconds = soak_seconds();
  Findings findings;
  std::vector<std::string> thread_errors(kMasterThreads);
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  {
    std::vector<std::thread> threads;
    for (int i = 0; i < kMasterThreads; ++i) {
      threads.emplace_back([&, i] {
        try {
          Driver(i, findings).run(deadline);
        } catch (const std::exception& e) {
          thread_errors[static_cast<size_t>(i)] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  synchronize();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  for (int i = 0; i < kMasterThreads; ++i) {
    EXPECT_EQ(thread_errors[static_cast<size_t>(i)], "") << "master thread " << i << " threw";
  }
  for (const std::string& f : findings.failures) ADD_FAILURE() << f;

  uint64_t total = 0;
  std::string mix;
  for (int a = 0; a < static_cast<int>(Action::kCount); ++a) {
    const uint64_t n = findings.done[a].load();
    total += n;
    mix += std::string(mix.empty() ? "" : ", ") + action_name(static_cast<Action>(a)) + " " + std::to_string(n);
    EXPECT_GT(n, 0u) << action_name(static_cast<Action>(a)) << " never ran";
  }

  // Every handle is gone (the drivers' tensors, streams and events died with them):
  // the workers hold what they held before.
  const std::vector<Footprint> after = footprint();
  ASSERT_EQ(after.size(), before.size());
  for (size_t node = 0; node < after.size(); ++node) {
    SCOPED_TRACE("node " + std::to_string(node));
    EXPECT_EQ(after[node].memory_in_use, before[node].memory_in_use);
    EXPECT_EQ(after[node].live_tensors, before[node].live_tensors);
    EXPECT_EQ(after[node].live_events, before[node].live_events);
    EXPECT_EQ(after[node].streams, before[node].streams);
  }
  int64_t peak = 0;
  for (const NodeStats& s : stats()) peak = std::max(peak, s.memory_peak);
  std::printf("[ figures  ] soak %.1f s, %d master threads, %d workers: %llu steps (%s); worker tensor memory "
              "peak %lld KiB, back to baseline\n",
              elapsed, kMasterThreads, kNodes, static_cast<unsigned long long>(total), mix.c_str(),
              static_cast<long long>(peak >> 10));
  EXPECT_EQ(job.stop().problems(), "");
}

}  // namespace
}  // namespace thd::test
