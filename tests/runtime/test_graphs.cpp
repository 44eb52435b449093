// Graphs (docs/graphs.md): ops captured once and replayed with one command per
// node. Nothing runs during a capture; each replay computes what the same ops issued
// eagerly would, reading its inputs' values at the time of the replay; the graph's
// own tensors hold the latest replay's values; sync points inside a capture fail at
// the call site; a graph's tensors live until it is reset.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include <thd/distributed.h>
#include <thd/graph.h>
#include <thd/stream.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class Graphs : public JobTest<2> {};

Tensor filled(float v, int64_t n = 4) { return Tensor::full({n}, v, kFloat32); }

std::vector<uint64_t> live_after_sync() {
  synchronize();
  return thd::detail::live_tensors_per_node();
}

// `call` throws a thd::Error (not a subclass raised by the worker) whose text names
// `op` and says it is inside a graph capture.
template <typename F>
::testing::AssertionResult refused_in_capture(F&& call, const std::string& op) {
  try {
    call();
    return ::testing::AssertionFailure() << op << " did not throw inside a capture";
  } catch (const RemoteError& e) {
    return ::testing::AssertionFailure() << op << " raised a RemoteError: " << e.what();
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find(op) == std::string::npos || what.find("inside a graph capture") == std::string::npos) {
      return ::testing::AssertionFailure() << op << " threw without naming the op and the capture: " << what;
    }
    return ::testing::AssertionSuccess();
  }
}

TEST_F(Graphs, NothingRunsDuringCaptureAndEachReplayRunsEverythingOnce) {
  DistributedTensor x = DistributedTensor::zeros({4}, kFloat32);
  DistributedTensor y, z;
  Graph g = thd::capture([&] {
    x.add_(1);
    y = x * 2;
    z = y + x;
  });
  EXPECT_FALSE(is_capturing());
  EXPECT_EQ(g.nodes(), std::vector<int>{0});
  EXPECT_EQ(g.num_ops(), 3u);
  // Captured, not run: x is untouched, and the graph's tensors have their metadata.
  EXPECT_TRUE(same_tensor(x.get(), filled(0)));
  EXPECT_EQ(z.shape(), (Shape{4}));
  for (int r = 1; r <= 5; ++r) {
    g.replay();
    EXPECT_EQ(g.replays(), static_cast<uint64_t>(r));
    const float v = static_cast<float>(r);
    EXPECT_TRUE(same_tensor(x.get(), filled(v))) << "replay " << r;
    EXPECT_TRUE(same_tensor(y.get(), filled(2 * v))) << "replay " << r;
    EXPECT_TRUE(same_tensor(z.get(), filled(3 * v))) << "replay " << r;
  }
}

TEST_F(Graphs, RaiiFormAndInputsUpdatedInPlaceBetweenReplays) {
  DistributedTensor in = DistributedTensor::zeros({4}, kFloat32);
  DistributedTensor out = DistributedTensor::zeros({4}, kFloat32);
  GraphCapture cap;
  EXPECT_TRUE(is_capturing());
  DistributedTensor t = (in + 1).mul(10);
  out.copy_(t.neg());
  Graph g = cap.end();
  EXPECT_FALSE(is_capturing());
  for (float v : {1.0f, -2.5f, 7.0f}) {
    in.fill_(v);  // eager, before the replay
    g.replay();
    out.add_(0.5);  // eager, after it
    EXPECT_TRUE(same_tensor(t.get(), filled((v + 1) * 10)));
    EXPECT_TRUE(same_tensor(out.get(), filled(-(v + 1) * 10 + 0.5f)));
  }
}

TEST_F(Graphs, TensorsCreatedInsideAreMadeAnewByEachReplay) {
  DistributedTensor made, ramp;
  Graph g = thd::capture([&] {
    made = DistributedTensor::full({4}, 3.0f, kFloat32);
    made.mul_(2);
    ramp = DistributedTensor::arange(0, 4, 1, kInt64);
  });
  for (int r = 0; r < 3; ++r) {
    g.replay();
    EXPECT_TRUE(same_tensor(made.get(), filled(6)));
    EXPECT_TRUE(same_tensor(ramp.get(), Tensor::arange(0, 4, 1, kInt64)));
  }
}

// A replay writes a graph's out-of-place results into the storage the previous
// replay's held: a view of a graph's tensor taken outside the graph sees the values
// of the latest replay, as the tensor itself does.
TEST_F(Graphs, AViewTakenOutsideTheGraphSeesTheLatestReplay) {
  DistributedTensor x = DistributedTensor::full({8}, 1.0f, kFloat32);
  DistributedTensor y, z;
  Graph g = thd::capture([&] {
    y = x * 2;
    z = (y + 1).relu();
  });
  g.replay();
  DistributedTensor v = y.view({2, 4});  // eager, between the replays
  EXPECT_TRUE(same_tensor(v.get().flatten(), filled(2, 8)));
  x.fill_(5);
  g.replay();
  EXPECT_TRUE(same_tensor(y.get(), filled(10, 8)));
  EXPECT_TRUE(same_tensor(z.get(), filled(11, 8)));
  EXPECT_TRUE(same_tensor(v.get().flatten(), filled(10, 8)));
  x.fill_(-3);
  g.replay();
  EXPECT_TRUE(same_tensor(y.get(), filled(-6, 8)));
  EXPECT_TRUE(same_tensor(z.get(), filled(0, 8)));
  EXPECT_TRUE(same_tensor(v.get().flatten(), filled(-6, 8)));
}

// The bytes of a downloaded tensor against a local one.
::testing::AssertionResult same_bytes(const Tensor& got, const Tensor& expected) {
  if (got.shape() != expected.shape() || got.dtype() != expected.dtype()) {
    return ::testing::AssertionFailure() << "another shape or dtype";
  }
  const Tensor a = got.contiguous(), b = expected.contiguous();
  if (std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) != 0) return ::testing::AssertionFailure() << "other bytes";
  return ::testing::AssertionSuccess();
}

// Matrix products, a broadcasting add, a comparison, pow, a sum over a dim, softmax,
// where and a random draw: each replay writes every result into the storage the
// first replay made, with the very values the same ops give eagerly (the random
// draws included: the same generator, advanced alike), and a view of a result
// taken outside the graph follows the replays.
TEST_F(Graphs, EveryReplayWritesTheFirstReplaysTensorsWithTheValuesEagerOpsGive) {
  DistributedTensor x = DistributedTensor::randn({6, 5}, kFloat32);
  DistributedTensor w = DistributedTensor::randn({5, 4}, kFloat32);
  DistributedTensor bias = DistributedTensor::randn({4}, kFloat32);
  struct Results {
    DistributedTensor mm, am, added, less, squared, summed, soft, noise, chosen;
  };
  auto step = [&](Results& r) {
    r.mm = x.matmul(w);
    r.am = bias.addmm(x, w, 0.5, 2.0);
    r.added = r.mm + bias;
    r.less = r.added.lt(r.am);
    r.squared = r.added.pow(2);
    r.summed = r.squared.sum({1});
    r.soft = r.am.softmax(1);
    r.noise = DistributedTensor::randn({6, 4}, kFloat32);
    r.chosen = where(r.less, r.soft, r.noise);
  };
  Results in_graph;
  Graph g = thd::capture([&] { step(in_graph); });
  const size_t memory = g.memory_bytes(0);
  DistributedTensor view;
  for (int r = 0; r < 4; ++r) {
    // The same seed before the eager step and before the replay: the same draws.
    manual_seed_all(100 + r);
    Results eager;
    step(eager);
    manual_seed_all(100 + r);
    g.replay();
    if (r == 0) view = in_graph.summed.view({2, 3});
    EXPECT_EQ(g.memory_bytes(0), memory);
    SCOPED_TRACE("replay " + std::to_string(r + 1));
    EXPECT_TRUE(same_bytes(in_graph.mm.get(), eager.mm.get()));
    EXPECT_TRUE(same_bytes(in_graph.am.get(), eager.am.get()));
    EXPECT_TRUE(same_bytes(in_graph.added.get(), eager.added.get()));
    EXPECT_TRUE(same_bytes(in_graph.less.get(), eager.less.get()));
    EXPECT_TRUE(same_bytes(in_graph.squared.get(), eager.squared.get()));
    EXPECT_TRUE(same_bytes(in_graph.summed.get(), eager.summed.get()));
    EXPECT_TRUE(same_bytes(in_graph.soft.get(), eager.soft.get()));
    EXPECT_TRUE(same_bytes(in_graph.noise.get(), eager.noise.get()));
    EXPECT_TRUE(same_bytes(in_graph.chosen.get(), eager.chosen.get()));
    EXPECT_TRUE(same_bytes(view.get(), eager.summed.get().view({2, 3})));
    // New inputs for the next replay, in place.
    x.mul_(-0.75);
    bias.add_(0.5);
  }
}

TEST_F(Graphs, ManyBackToBackReplaysOnBothNodesInOrder) {
  DistributedTensor a, b;
  {
    NodeScope on(1);
    b = DistributedTensor::zeros({16}, kInt64);
  }
  a = DistributedTensor::zeros({16}, kInt64);
  Graph g = thd::capture([&] {
    for (int i = 0; i < 100; ++i) {
      a.add_(1);
      b.sub_(1);
    }
  });
  EXPECT_EQ(g.nodes(), (std::vector<int>{0, 1}));
  EXPECT_EQ(g.num_ops(), 200u);
  for (int r = 0; r < 300; ++r) g.replay();
  EXPECT_TRUE(same_tensor(a.get(), Tensor::full({16}, int64_t{30000}, kInt64)));
  EXPECT_TRUE(same_tensor(b.get(), Tensor::full({16}, int64_t{-30000}, kInt64)));
}

TEST_F(Graphs, SyncPointsInsideACaptureFailAtTheCallSite) {
  DistributedTensor x = DistributedTensor::ones({4}, kFloat32);
  Tensor local = filled(2);
  Stream s = Stream::create(0);
  Event e;
  {
    GraphCapture cap;
    EXPECT_TRUE(refused_in_capture([&] { (void)x.get(); }, "get"));
    EXPECT_TRUE(refused_in_capture([&] { (void)x.sum().item<float>(); }, "get"));
    EXPECT_TRUE(refused_in_capture([&] { synchronize(); }, "synchronize"));
    EXPECT_TRUE(refused_in_capture([&] { (void)stats(); }, "stats"));
    EXPECT_TRUE(refused_in_capture([&] { s.synchronize(); }, "Stream::synchronize"));
    EXPECT_TRUE(refused_in_capture([&] { (void)s.query(); }, "Stream::query"));
    e.record(s);
    EXPECT_TRUE(refused_in_capture([&] { (void)e.query(); }, "Event::query"));
    EXPECT_TRUE(refused_in_capture([&] { e.synchronize(); }, "Event::synchronize"));
    EXPECT_TRUE(refused_in_capture([&] { (void)local.dist_send(0); }, "dist_send"));
    Graph inner;
    EXPECT_THROW((void)GraphCapture(), ValueError);  // captures do not nest
    x.add_(1);
    Graph g = cap.end();
    EXPECT_TRUE(refused_in_capture(
        [&] {
          GraphCapture again;
          g.replay();
        },
        "Graph::replay"));
    g.replay();
    EXPECT_TRUE(same_tensor(x.get(), filled(2)));
  }
  // An exception out of thd::capture discards the capture: nothing was sent, the
  // thread captures no more, and the program goes on.
  DistributedTensor never;
  EXPECT_THROW((void)thd::capture([&] {
                 never = x + 1;
                 (void)x.get();
               }),
               Error);
  EXPECT_FALSE(is_capturing());
  EXPECT_TRUE(same_tensor((x + 1).get(), filled(3)));
}

TEST_F(Graphs, MemoryIsTheGraphsOwnTensorsOnceAndResetFreesIt) {
  const std::vector<uint64_t> baseline = live_after_sync();
  DistributedTensor x = DistributedTensor::zeros({256}, kFloat32);  // 1 KiB, an input
  Graph g = thd::capture([&] {
    DistributedTensor a = x + 1;                  // 1 KiB
    DistributedTensor v = a.view({16, 16});       // a's storage
    DistributedTensor w = x.view({16, 16});       // the input's storage: not the graph's
    DistributedTensor d = (v * w).to(kFloat64);   // 1 KiB for v * w, 2 KiB for d
    x.copy_(d.flatten().to(kFloat32));            // flatten: a view of d; 1 KiB for the cast
  });
  EXPECT_EQ(g.memory_bytes(0), 1024u + 1024u + 2048u + 1024u);
  EXPECT_EQ(g.memory_bytes(1), 0u);
  for (int r = 0; r < 3; ++r) g.replay();
  // The graph's tensors stay on the node as long as the graph, whatever the
  // program dropped: 7 made by the capture (a, v, w, v * w, d, flatten, the cast).
  std::vector<uint64_t> expected = baseline;
  expected[0] += 1 + 7;
  EXPECT_EQ(live_after_sync(), expected);
  EXPECT_TRUE(same_tensor(x.get(), Tensor::zeros({256}, kFloat32))) << "x = (x + 1) * x from 0 stays 0";
  g.reset();
  EXPECT_FALSE(g.defined());
  expected[0] = baseline[0] + 1;
  EXPECT_EQ(live_after_sync(), expected);
  EXPECT_THROW(g.replay(), ValueError);
}

TEST_F(Graphs, AGraphNeverReplayedMadeNothingAndItsTensorsSaySo) {
  const std::vector<uint64_t> baseline = live_after_sync();
  DistributedTensor x = DistributedTensor::ones({4}, kFloat32);
  DistributedTensor y;
  Graph g = thd::capture([&] {
    DistributedTensor t = x * 2;  // dropped by the program inside the capture
    y = t + 1;
  });
  // Before any replay the graph's tensors hold nothing: an error that says so, not
  // "never created".
  try {
    (void)y.get();
    FAIL() << "a graph's tensor was read before the graph's first replay";
  } catch (const RemoteError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("made by graph " + std::to_string(g.id())), std::string::npos) << what;
    EXPECT_NE(what.find("has not been replayed"), std::string::npos) << what;
  }
  // A graph reset (or dropped) before its first replay frees nothing on the node:
  // the program goes on, and no free fails.
  const uint64_t id = g.id();
  g.reset();
  try {
    g.replay();
    FAIL() << "a reset graph replayed";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("graph " + std::to_string(id) + " was reset"), std::string::npos)
        << e.what();
  }
  y = DistributedTensor();
  x.add_(1);
  EXPECT_TRUE(same_tensor(x.get(), filled(2)));
  std::vector<uint64_t> expected = baseline;
  expected[0] += 1;
  EXPECT_EQ(live_after_sync(), expected);
  {
    Graph dropped = thd::capture([&] { (void)(x * 3); });
  }
  EXPECT_EQ(live_after_sync(), expected);
}

TEST_F(Graphs, ACaptureEndedOnAnotherThreadEndsOnItsOwn) {
  DistributedTensor x = DistributedTensor::zeros({4}, kFloat32);
  auto discarded = std::make_unique<GraphCapture>();
  x.add_(1);  // captured, then discarded
  std::thread([&] { discarded.reset(); }).join();
  EXPECT_FALSE(is_capturing());
  auto ended = std::make_unique<GraphCapture>();
  x.add_(2);
  Graph g;
  std::thread([&] { g = ended->end(); }).join();
  EXPECT_FALSE(is_capturing());
  g.replay();
  EXPECT_TRUE(same_tensor(x.get(), filled(2)));
}

TEST_F(Graphs, ACopyOfAResetGraphRefusesToReplay) {
  DistributedTensor x = DistributedTensor::zeros({4}, kFloat32);
  Graph g = thd::capture([&] { x.add_(1); });
  Graph copy = g;
  g.reset();
  try {
    copy.replay();
    FAIL() << "replay of a reset graph did not throw";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("was reset"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Graph().replay(), ValueError);
}

}  // namespace
}  // namespace thd::test

namespace thd::test {
namespace {

// Graphs that span nodes: copies between workers, collectives, side streams and
// cross-node events inside, each working in every replay as in eager mode.
class GraphsAcrossNodes : public JobTest<3> {};

TEST_F(GraphsAcrossNodes, CopiesBetweenWorkersInsideAGraph) {
  DistributedTensor a = DistributedTensor::zeros({8}, kFloat32);  // node 0: the input
  DistributedTensor back;
  DistributedTensor on1, on2;
  Graph g = thd::capture([&] {
    on1 = (a + 1).to_node(1);
    {
      NodeScope on(1);
      on1.mul_(2);
    }
    on2 = on1.to_node(2).add(a.to_node(2));
    back = on2.to_node(0);
  });
  EXPECT_EQ(g.nodes(), (std::vector<int>{0, 1, 2}));
  for (float v : {0.0f, 1.0f, 5.0f}) {
    a.fill_(v);
    g.replay();
    const float expected = (v + 1) * 2 + v;
    EXPECT_TRUE(same_tensor(back.get(), Tensor::full({8}, expected, kFloat32))) << "a = " << v;
    EXPECT_EQ(on2.node(), 2);
    EXPECT_TRUE(same_tensor(on2.get(), Tensor::full({8}, expected, kFloat32)));
  }
  for (int r = 0; r < 50; ++r) g.replay();  // back to back
  EXPECT_TRUE(same_tensor(back.get(), Tensor::full({8}, 17.0f, kFloat32)));
}

TEST_F(GraphsAcrossNodes, CollectivesInsideAGraph) {
  std::vector<DistributedTensor> grads;
  for (int node = 0; node < 3; ++node) {
    NodeScope on(node);
    grads.push_back(DistributedTensor::zeros({4}, kFloat32));
  }
  std::vector<DistributedTensor> gathered;
  Graph g = thd::capture([&] {
    for (int node = 0; node < 3; ++node) {
      NodeScope on(node);
      grads[static_cast<size_t>(node)].fill_(node + 1);
    }
    all_reduce(grads, ReduceOp::Sum);  // 1 + 2 + 3 on every node
    gathered = all_gather(grads);
  });
  for (int r = 0; r < 5; ++r) {
    g.replay();
    // An eager op between replays, on one member: the next replay's fill_ undoes it.
    grads[1].mul_(10);
  }
  for (int node = 0; node < 3; ++node) {
    const float expected = node == 1 ? 60.0f : 6.0f;
    EXPECT_TRUE(same_tensor(grads[static_cast<size_t>(node)].get(), Tensor::full({4}, expected, kFloat32)))
        << "node " << node;
    EXPECT_TRUE(same_tensor(gathered[static_cast<size_t>(node)].get(), Tensor::full({3, 4}, 6.0f, kFloat32)))
        << "node " << node;
  }
}

// Messages the workers sent, summed over the nodes.
uint64_t worker_messages_sent() {
  uint64_t sent = 0;
  for (const NodeStats& s : stats()) sent += s.messages_sent;
  return sent;
}

// The workers' messages per call of `step` (what `step` costs beyond whatever a
// synchronize and a stats round trip cost: those cancel out).
template <typename F>
double messages_per_call(F&& step) {
  auto run = [&](int calls) {
    synchronize();
    const uint64_t before = worker_messages_sent();
    for (int i = 0; i < calls; ++i) step();
    synchronize();
    return worker_messages_sent() - before;
  };
  const uint64_t few = run(10), many = run(30);
  return static_cast<double>(many - few) / 20.0;
}

// Values whose float sums depend on the order of the additions.
Tensor order_sensitive(int node, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v[static_cast<size_t>(i)] = std::ldexp(1.0f + 0.37f * static_cast<float>((i * 7 + node * 13) % 11),
                                           static_cast<int>((i * 5 + node * 3) % 41) - 20);
  }
  return Tensor::from_vector(v, {n});
}

void one_exchange_with_the_eager_bits(double replay_messages) {
  constexpr int64_t kN = 256;
  std::vector<DistributedTensor> sources, eager, replayed;
  for (int node = 0; node < 3; ++node) {
    sources.push_back(DistributedTensor::from(order_sensitive(node, kN), node));
    NodeScope on(node);
    eager.push_back(DistributedTensor::zeros({kN}, kFloat32));
    replayed.push_back(DistributedTensor::zeros({kN}, kFloat32));
  }
  auto eager_step = [&] {
    for (int node = 0; node < 3; ++node) {
      NodeScope on(node);
      eager[static_cast<size_t>(node)].copy_(sources[static_cast<size_t>(node)]);
    }
    all_reduce(eager, ReduceOp::Sum);
  };
  Graph g = thd::capture([&] {
    for (int node = 0; node < 3; ++node) {
      NodeScope on(node);
      replayed[static_cast<size_t>(node)].copy_(sources[static_cast<size_t>(node)]);
    }
    all_reduce(replayed, ReduceOp::Sum);
  });
  for (int r = 0; r < 3; ++r) {
    eager_step();
    g.replay();
    for (int node = 0; node < 3; ++node) {
      const std::vector<float> want = eager[static_cast<size_t>(node)].get().to_vector<float>();
      const std::vector<float> got = replayed[static_cast<size_t>(node)].get().to_vector<float>();
      ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
          << "replay " << r << ", node " << node << ": not the eager all_reduce's bits";
    }
  }
  // Eagerly, the members' claims (a ring all_gather: 2 messages each) and then the
  // all_reduce (recursive doubling among 3: 4 messages); a replay after the first
  // sends each member's data and word once, in the form the members settled on.
  EXPECT_EQ(messages_per_call(eager_step), 10.0);
  EXPECT_EQ(messages_per_call([&] { g.replay(); }), replay_messages);
}

// The replayed all_reduce in each form of the flagged all_reduce (docs/graphs.md,
// "Collectives"), chosen for the workers through THD_FLAGGED_ALL_REDUCE: the eager
// op's bits either way; direct sends each member's data and word to each other
// member once (6 messages among 3), rooted to node 0 and back (4).
TEST(GraphForms, AReplayedAllReduceIsOneExchangeWithTheEagerOnesBitsInEitherForm) {
  for (const auto& [form, replay_messages] : {std::pair<const char*, double>{"direct", 6.0}, {"rooted", 4.0}}) {
    SCOPED_TRACE(form);
    ::setenv("THD_FLAGGED_ALL_REDUCE", form, 1);
    LocalJob job(3);
    ::unsetenv("THD_FLAGGED_ALL_REDUCE");
    one_exchange_with_the_eager_bits(replay_messages);
    (void)job.stop();
  }
}

TEST(GraphsAcrossNodesBuffered, AReplayWaitsInTheBuffersAndASyncPointOnOneNodeSendsEveryPart) {
  // A flusher that never finds anything idle for long enough: whatever is sent, a
  // sync point or the replay itself sent.
  MasterWorkerOptions options;
  options.flush_after = std::chrono::seconds(60);
  LocalJob job(3, options);
  std::vector<DistributedTensor> grads;
  for (int node = 0; node < 3; ++node) {
    NodeScope on(node);
    grads.push_back(DistributedTensor::ones({8}, kFloat32));
  }
  DistributedTensor copied;
  Graph g = thd::capture([&] {
    all_reduce(grads, ReduceOp::Sum);
    copied = grads[2].to_node(0);
  });
  synchronize();
  // Back-to-back replays wait in the buffers like any op, and a sync point on node 0
  // alone sends the parts of nodes 1 and 2 too: node 0 blocks in the replay on them.
  for (int r = 0; r < 5; ++r) g.replay();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(same_tensor(copied.get(), Tensor::full({8}, 243.0f, kFloat32)));  // 3^5
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  synchronize();
  (void)job.stop();
}

TEST(GraphForms, AMalformedFormFailsTheReplayedAllReduceNamingTheSetting) {
  ::setenv("THD_FLAGGED_ALL_REDUCE", "fastest", 1);
  LocalJob job(3);
  ::unsetenv("THD_FLAGGED_ALL_REDUCE");
  std::vector<DistributedTensor> grads;
  for (int node = 0; node < 3; ++node) {
    NodeScope on(node);
    grads.push_back(DistributedTensor::ones({8}, kFloat32));
  }
  Graph g = thd::capture([&] { all_reduce(grads, ReduceOp::Sum); });
  const auto start = std::chrono::steady_clock::now();
  g.replay();
  for (int node = 0; node < 3; ++node) {
    try {
      (void)grads[static_cast<size_t>(node)].get();
      ADD_FAILURE() << "node " << node << ": the all_reduce ran with a malformed THD_FLAGGED_ALL_REDUCE";
    } catch (const RemoteError& e) {
      EXPECT_NE(std::string(e.what()).find("THD_FLAGGED_ALL_REDUCE must be auto, direct or rooted, not 'fastest'"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "a member waited for the others";
  (void)job.stop();
}

TEST_F(GraphsAcrossNodes, APoisonedMemberOfAReplayedAllReducePoisonsEveryOutputAndNobodyWaits) {
  DistributedTensor values, index;
  {
    NodeScope on(1);
    values = DistributedTensor::arange(8, kFloat32);
    index = DistributedTensor::zeros({8}, kInt64);
  }
  std::vector<DistributedTensor> grads(3);
  Graph g = thd::capture([&] {
    for (int node = 0; node < 3; ++node) {
      NodeScope on(node);
      grads[static_cast<size_t>(node)] =
          node == 1 ? values.index_select(0, index) : DistributedTensor::full({8}, 1.0f, kFloat32);
    }
    all_reduce(grads, ReduceOp::Sum);
  });
  for (int r = 0; r < 3; ++r) g.replay();  // settled after the first
  EXPECT_TRUE(same_tensor(grads[2].get(), Tensor::full({8}, 2.0f, kFloat32)));
  {
    NodeScope on(1);
    index.fill_(99);  // out of range on node 1: its all_reduce input is poisoned
  }
  const auto start = std::chrono::steady_clock::now();
  g.replay();  // replay 4
  for (int node : {0, 2}) {
    try {
      (void)grads[static_cast<size_t>(node)].get();
      ADD_FAILURE() << "node " << node << "'s output of the all_reduce is not poisoned";
    } catch (const RemoteError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("node 1 cannot take part"), std::string::npos) << what;
      EXPECT_NE(what.find("of graph " + std::to_string(g.id()) + " (replay 4)"), std::string::npos) << what;
      EXPECT_EQ(e.context().op, "all_reduce") << what;
    }
  }
  try {
    (void)grads[1].get();
    ADD_FAILURE() << "node 1's output of the all_reduce is not poisoned";
  } catch (const RemoteError& e) {
    EXPECT_EQ(e.context().op, "index_select") << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  try {
    synchronize();
  } catch (const RemoteError&) {
  }
  {
    NodeScope on(1);
    index.fill_(3);
  }
  g.replay();
  for (int node = 0; node < 3; ++node) {
    EXPECT_TRUE(same_tensor(grads[static_cast<size_t>(node)].get(), Tensor::full({8}, 5.0f, kFloat32)))
        << "node " << node;
  }
}

TEST_F(GraphsAcrossNodes, SideStreamsAndCrossNodeEventsInsideAGraph) {
  Stream side = Stream::create(1);
  DistributedTensor x = DistributedTensor::zeros({1024}, kFloat32);  // node 0
  DistributedTensor y;
  {
    NodeScope on(1);
    y = DistributedTensor::zeros({1024}, kFloat32);
  }
  Event ready;
  Graph g = thd::capture([&] {
    for (int i = 0; i < 20; ++i) x.add_(1);
    ready.record(current_stream(0));
    side.wait(ready);  // node 1's side stream waits for node 0's work
    StreamScope in(side);
    y.copy_(x.to_node(1));
    y.mul_(2);
  });
  for (int r = 1; r <= 3; ++r) {
    g.replay();
    side.synchronize();
    EXPECT_TRUE(same_tensor(y.get(), Tensor::full({1024}, 40.0f * static_cast<float>(r), kFloat32))) << "replay " << r;
  }
}

}  // namespace
}  // namespace thd::test

namespace thd::test {
namespace {

// `call` raises a RemoteError naming `op`, graph `graph` and replay `replay`.
template <typename F>
::testing::AssertionResult fails_in_replay(F&& call, const std::string& op, uint64_t graph, uint64_t replay) {
  try {
    call();
    return ::testing::AssertionFailure() << "did not throw";
  } catch (const RemoteError& e) {
    const std::string what = e.what();
    const std::string named = "of graph " + std::to_string(graph) + " (replay " + std::to_string(replay) + ")";
    if (e.context().op != op || what.find(named) == std::string::npos) {
      return ::testing::AssertionFailure() << "the error does not name " << op << " and \"" << named << "\": " << what;
    }
    return ::testing::AssertionSuccess();
  }
}

class GraphErrors : public JobTest<2> {};

TEST_F(GraphErrors, AFailingOpPoisonsItsOutputsAndNamesTheGraphTheReplayAndTheOp) {
  DistributedTensor a = DistributedTensor::arange(4, kFloat32);
  DistributedTensor index = DistributedTensor::zeros({2}, kInt64);
  DistributedTensor out;
  Graph g = thd::capture([&] { out = a.index_select(0, index).add(1); });
  g.replay();
  EXPECT_TRUE(same_tensor(out.get(), filled(1, 2)));
  index.fill_(9);  // out of range: only the worker can tell
  g.replay();
  EXPECT_TRUE(fails_in_replay([&] { (void)out.get(); }, "index_select", g.id(), 2));
  synchronize();  // raised by the get: not again
  // Two failing replays are two failures, each raised once.
  g.replay();
  g.replay();
  EXPECT_TRUE(fails_in_replay([&] { synchronize(); }, "index_select", g.id(), 3));
  EXPECT_TRUE(fails_in_replay([&] { synchronize(); }, "index_select", g.id(), 4));
  synchronize();
  // The next replay makes the graph's tensors anew: the poison is gone.
  index.fill_(3);
  g.replay();
  EXPECT_TRUE(same_tensor(out.get(), filled(4, 2)));
}

TEST_F(GraphErrors, AnEventRecordedAfterAFailureNamesTheGraphAndTheReplay) {
  DistributedTensor a = DistributedTensor::arange(4, kFloat32);  // node 0
  DistributedTensor index = DistributedTensor::zeros({2}, kInt64);
  DistributedTensor out, y, z;
  {
    NodeScope on(1);
    y = DistributedTensor::zeros({2}, kFloat32);
  }
  Stream side = Stream::create(1);
  Event done;
  Graph g = thd::capture([&] {
    out = a.index_select(0, index).add(1);
    done.record(current_stream(0));
    side.wait(done);  // node 1 hears of node 0's failure in the event's notice
    StreamScope in(side);
    z = y + 1;
  });
  g.replay();
  done.synchronize();
  EXPECT_TRUE(same_tensor(z.get(), filled(1, 2)));
  index.fill_(9);  // out of range: the second replay fails before the record
  g.replay();
  // The record's status (a round trip to node 0) ...
  EXPECT_TRUE(fails_in_replay([&] { done.synchronize(); }, "index_select", g.id(), 2));
  // ... and node 1's stream, poisoned through the notice, both name it.
  EXPECT_TRUE(fails_in_replay([&] { (void)z.get(); }, "index_select", g.id(), 2));
  synchronize();
}

TEST_F(GraphErrors, AnInputDroppedByTheProgramStaysForTheReplays) {
  DistributedTensor out = DistributedTensor::zeros({4}, kFloat32);
  Graph g;
  {
    DistributedTensor dropped = DistributedTensor::full({4}, 2.0f, kFloat32);
    g = thd::capture([&] { out.copy_(dropped * 3); });
  }
  g.replay();
  EXPECT_TRUE(same_tensor(out.get(), filled(6)));
}

// Kills `node`'s worker while replays of `g` are in flight, then replays on: within
// 5 s one fails with WorkerLost naming the node.
void kill_then_expect_replays_lost(LocalJob& job, Graph& g, int node) {
  job.kill_worker(node);
  const auto killed = std::chrono::steady_clock::now();
  bool lost = false;
  try {
    for (int r = 0; r < 1000 && !lost; ++r) {
      g.replay();
      if (r % 100 == 99) synchronize();
    }
    synchronize();
  } catch (const WorkerLost& e) {
    lost = true;
    EXPECT_EQ(e.context().node, node) << e.what();
  }
  EXPECT_TRUE(lost) << "replays with node " << node << " dead raised no WorkerLost";
  EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::seconds(5));
}

TEST(GraphFaults, AWorkerLostDuringAReplayFailsItWithWorkerLost) {
  LocalJob job(2);
  DistributedTensor a = DistributedTensor::zeros({4}, kFloat32);
  DistributedTensor b;
  {
    NodeScope on(1);
    b = DistributedTensor::zeros({400, 400}, kFloat32);
  }
  Graph g = thd::capture([&] {
    a.add_(1);
    for (int i = 0; i < 20; ++i) b = b.matmul(b).div(400);
  });
  g.replay();
  synchronize();
  for (int r = 0; r < 20; ++r) g.replay();  // in flight when node 1 dies
  kill_then_expect_replays_lost(job, g, 1);
  // Node 0 carries on.
  EXPECT_TRUE(same_tensor((a * 0).get(), Tensor::zeros({4}, kFloat32)));
  (void)job.stop();
}

TEST(GraphFaults, AWorkerLostDuringReplayedAllReducesFailsThemWithWorkerLost) {
  LocalJob job(3);
  std::vector<DistributedTensor> grads;
  for (int node = 0; node < 3; ++node) {
    NodeScope on(node);
    grads.push_back(DistributedTensor::ones({64}, kFloat32));
  }
  Graph g = thd::capture([&] {
    all_reduce(grads, ReduceOp::Sum);
    for (int node = 0; node < 3; ++node) {
      NodeScope on(node);
      grads[static_cast<size_t>(node)].div_(3);
    }
  });
  for (int r = 0; r < 3; ++r) g.replay();  // settled on the one-exchange form
  synchronize();
  for (int r = 0; r < 20; ++r) g.replay();
  kill_then_expect_replays_lost(job, g, 2);
  (void)job.stop();
}

TEST(GraphFaults, AGraphIsRefusedInASessionOtherThanTheOneThatCapturedIt) {
  Graph g;
  {
    LocalJob first(1);
    DistributedTensor x = DistributedTensor::zeros({4}, kFloat32);
    g = thd::capture([&] { x.add_(1); });
    g.replay();
    EXPECT_TRUE(same_tensor(x.get(), filled(1)));
    (void)first.stop();
  }
  LocalJob second(1);
  try {
    g.replay();
    FAIL() << "a graph of an ended session replayed";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("session that has ended"), std::string::npos) << e.what();
  }
  g.reset();  // nothing to drop: its session is gone
  (void)second.stop();
}

}  // namespace
}  // namespace thd::test
