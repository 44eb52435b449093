// Collectives the master issues over tensors on several nodes (the workers run them
// among themselves) give what the same reduction computed locally gives: all_reduce
// with every op, broadcast, reduce, all_gather, reduce_scatter, over all nodes and
// over subsets in any order, repeated (cached groups), ordered with the ops around
// them. Bad calls throw at the call site.
#include <gtest/gtest.h>

#include <cmath>

#include <thd/distributed.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class Collectives : public JobTest<3> {};

// Local data for each listed node, and its upload.
struct Spread {
  std::vector<Tensor> local;
  std::vector<DistributedTensor> remote;
};

Spread spread(const std::vector<int>& nodes, const Shape& shape, DType dtype, uint32_t seed, bool positive = false) {
  Spread s;
  for (size_t i = 0; i < nodes.size(); ++i) {
    s.local.push_back(sample_tensor(shape, dtype, seed + static_cast<uint32_t>(i), positive));
    s.remote.push_back(s.local.back().dist_send(nodes[i]));
  }
  return s;
}

Tensor fold(const std::vector<Tensor>& xs, ReduceOp op) {
  Tensor acc = xs[0].clone();
  for (size_t i = 1; i < xs.size(); ++i) {
    switch (op) {
      case ReduceOp::Sum: acc = acc + xs[i]; break;
      case ReduceOp::Avg: acc = acc + xs[i]; break;
      case ReduceOp::Prod: acc = acc * xs[i]; break;
      case ReduceOp::Min: acc = acc.minimum(xs[i]); break;
      case ReduceOp::Max: acc = acc.maximum(xs[i]); break;
      default: throw std::logic_error("fold: op not used by these tests");
    }
  }
  if (op == ReduceOp::Avg) acc = acc / static_cast<double>(xs.size());
  return acc.to(xs[0].dtype());
}

::testing::AssertionResult all_match(const std::vector<DistributedTensor>& got, const std::vector<Tensor>& expected,
                                     const std::vector<int>& nodes) {
  for (size_t i = 0; i < got.size(); ++i) {
    auto r = matches(got[i], expected[i], nodes[i]);
    if (!r) return r << " (tensor " << i << ", node " << nodes[i] << ")";
  }
  return ::testing::AssertionSuccess();
}

const std::vector<std::vector<int>> kNodeSets = {{0, 1, 2}, {2, 0}, {1, 2}, {2, 1, 0}};

TEST_F(Collectives, AllReduceEveryOpOverEveryNodeSet) {
  for (const auto& nodes : kNodeSets) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max}) {
      for (DType dt : {kInt64, kFloat32}) {
        SCOPED_TRACE(std::string(reduce_op_name(op)) + " " + std::string(dtype_name(dt)) + " over " +
                     std::to_string(nodes.size()) + " nodes starting at " + std::to_string(nodes[0]));
        Spread s = spread(nodes, {3, 5}, dt, 10);
        const Tensor expected = fold(s.local, op);
        all_reduce(s.remote, op);
        EXPECT_TRUE(all_match(s.remote, std::vector<Tensor>(nodes.size(), expected), nodes));
      }
    }
  }
  Spread f = spread({0, 1, 2}, {7}, kFloat64, 20);
  all_reduce(f.remote, ReduceOp::Avg);
  EXPECT_TRUE(all_match(f.remote, std::vector<Tensor>(3, fold(f.local, ReduceOp::Avg)), {0, 1, 2}));
  // The default op is Sum; a large tensor takes the chunked path.
  Spread big = spread({1, 0}, {1 << 18}, kFloat32, 30);
  all_reduce(big.remote);
  EXPECT_TRUE(all_match(big.remote, std::vector<Tensor>(2, fold(big.local, ReduceOp::Sum)), {1, 0}));
}

TEST_F(Collectives, BroadcastAndReduce) {
  for (const auto& nodes : kNodeSets) {
    for (size_t root = 0; root < nodes.size(); ++root) {
      SCOPED_TRACE("root index " + std::to_string(root) + " of " + std::to_string(nodes.size()));
      Spread b = spread(nodes, {2, 4}, kInt32, 40);
      broadcast(b.remote, root);
      EXPECT_TRUE(all_match(b.remote, std::vector<Tensor>(nodes.size(), b.local[root]), nodes));

      Spread r = spread(nodes, {6}, kFloat64, 50);
      reduce(r.remote, root, ReduceOp::Max);
      std::vector<Tensor> expected = r.local;
      expected[root] = fold(r.local, ReduceOp::Max);
      EXPECT_TRUE(all_match(r.remote, expected, nodes)) << "only the root changes";
    }
  }
}

TEST_F(Collectives, AllGatherAndReduceScatter) {
  for (const auto& nodes : kNodeSets) {
    SCOPED_TRACE("over " + std::to_string(nodes.size()) + " nodes starting at " + std::to_string(nodes[0]));
    const int64_t n = static_cast<int64_t>(nodes.size());
    Spread g = spread(nodes, {2, 3}, kFloat32, 60);
    std::vector<DistributedTensor> gathered = all_gather(g.remote);
    ASSERT_EQ(gathered.size(), nodes.size());
    EXPECT_TRUE(all_match(gathered, std::vector<Tensor>(nodes.size(), stack(g.local)), nodes));
    EXPECT_TRUE(all_match(g.remote, g.local, nodes)) << "all_gather changed its inputs";

    Spread rs = spread(nodes, {n * 2, 3}, kInt64, 70);
    std::vector<DistributedTensor> scattered = reduce_scatter(rs.remote, ReduceOp::Sum);
    const std::vector<Tensor> blocks = fold(rs.local, ReduceOp::Sum).chunk(n);
    EXPECT_TRUE(all_match(scattered, blocks, nodes));
    std::vector<DistributedTensor> scattered_min = reduce_scatter(rs.remote, ReduceOp::Min);
    EXPECT_TRUE(all_match(scattered_min, fold(rs.local, ReduceOp::Min).chunk(n), nodes));
  }
}

// The in-place collectives take a braced list of handles, as torch code lists
// tensors: the handles share the remote tensors, which the collective writes.
TEST_F(Collectives, InPlaceFormsTakeABracedList) {
  const Tensor a = sample_tensor({5}, kFloat64, 80);
  const Tensor b = sample_tensor({5}, kFloat64, 81);
  const Tensor c = sample_tensor({5}, kFloat64, 82);
  const DistributedTensor g0 = a.dist_send(0);
  const DistributedTensor g1 = b.dist_send(1);
  const DistributedTensor g2 = c.dist_send(2);
  all_reduce({g0, g1, g2});
  const Tensor sum = fold({a, b, c}, ReduceOp::Sum);
  EXPECT_TRUE(all_match({g0, g1, g2}, {sum, sum, sum}, {0, 1, 2}));

  all_reduce({g2, g0}, ReduceOp::Max);
  EXPECT_TRUE(all_match({g0, g1, g2}, {sum, sum, sum}, {0, 1, 2})) << "max of equal tensors";

  const DistributedTensor h0 = DistributedTensor::from(a, 0);
  const DistributedTensor h1 = DistributedTensor::from(b, 1);
  broadcast({h0, h1}, 1);
  EXPECT_TRUE(all_match({h0, h1}, {b, b}, {0, 1}));
  const DistributedTensor r1 = DistributedTensor::from(a, 1);
  const DistributedTensor r2 = DistributedTensor::from(c, 2);
  reduce({r1, r2}, 0, ReduceOp::Min);
  EXPECT_TRUE(all_match({r1, r2}, {fold({a, c}, ReduceOp::Min), c}, {1, 2}));
}

TEST_F(Collectives, OrderedWithTheOpsAroundThem) {
  std::vector<DistributedTensor> xs;
  for (int node = 0; node < 3; ++node) xs.push_back(DistributedTensor::from(Tensor::full({4}, node + 1, kInt64), node));
  for (int round = 0; round < 10; ++round) {
    for (auto& x : xs) x.add_(1);  // before: included
    all_reduce(xs);
  }
  for (auto& x : xs) x.mul_(2);  // after: applied to the result
  // Each round: every tensor adds 1, then all become the sum of the three.
  int64_t v[3] = {1, 2, 3};
  for (int round = 0; round < 10; ++round) {
    const int64_t total = (v[0] + 1) + (v[1] + 1) + (v[2] + 1);
    v[0] = v[1] = v[2] = total;
  }
  for (int node = 0; node < 3; ++node) {
    EXPECT_TRUE(same_tensor(xs[static_cast<size_t>(node)].get(), Tensor::full({4}, 2 * v[0], kInt64)))
        << "node " << node;
  }
}

TEST_F(Collectives, BadCallsThrowAtTheCallSite) {
  auto on = [](int node, const Shape& shape = {4}, DType dt = kFloat32) {
    return Tensor::ones(shape, dt).dist_send(node);
  };
  std::vector<DistributedTensor> same_node = {on(0), on(0)};
  std::vector<DistributedTensor> shapes = {on(0, {4}), on(1, {5})};
  std::vector<DistributedTensor> dtypes = {on(0), on(1, {4}, kInt32)};
  std::vector<DistributedTensor> empty;
  std::vector<DistributedTensor> fine = {on(0), on(1)};
  std::vector<DistributedTensor> ints = {on(0, {4}, kInt32), on(1, {4}, kInt32)};
  EXPECT_THROW(all_reduce(same_node), Error);
  try {
    std::vector<DistributedTensor> twice_on_0 = {on(0), on(1), on(0)};
    all_reduce(twice_on_0);
    ADD_FAILURE() << "two tensors on node 0 were accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("tensors 0 and 2 are both on node 0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(all_reduce(shapes), Error);
  EXPECT_THROW(all_reduce(dtypes), Error);
  EXPECT_THROW(all_reduce(empty), Error);
  EXPECT_THROW(all_reduce(fine, ReduceOp::BAnd), Error);  // bitwise ops need integers
  EXPECT_THROW(all_reduce(ints, ReduceOp::Avg), Error);   // averages need floating point
  EXPECT_THROW(broadcast(fine, 2), Error);
  EXPECT_THROW(reduce(fine, 5), Error);
  EXPECT_THROW(all_gather(same_node), Error);
  std::vector<DistributedTensor> odd = {on(0, {3}), on(1, {3})};  // 3 rows do not split in 2
  EXPECT_THROW(reduce_scatter(odd), Error);
  // Nothing was sent: the tensors are as they were and a valid call works.
  all_reduce(fine);
  EXPECT_TRUE(same_tensor(fine[0].get(), Tensor::full({4}, 2)));
  EXPECT_TRUE(same_tensor(same_node[1].get(), Tensor::ones({4})));
}

// float16 and bfloat16 sums among the workers accumulate in float32 and are
// rounded once (torch's _test_allreduce_basics): four nodes' 15464, 5632, -13960
// and -7592 sum to -456 in float16 and -416 in bfloat16 (whose inputs round to
// 15488, 5632, -13952, -7584), where 16-bit partial sums give -464 and -384.
class FourNodeCollectives : public JobTest<4> {};

TEST_F(FourNodeCollectives, HalfPrecisionAllReduceSumRoundsOnce) {
  const double inputs[4] = {15464, 5632, -13960, -7592};
  for (DType dt : {kFloat16, kBFloat16}) {
    const double expected = dt == kFloat16 ? -456 : -416;
    // One element, and one past the sizes the small-message algorithm takes.
    for (int64_t count : {int64_t{1}, int64_t{40'000}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + ", " + std::to_string(count) + " elements");
      std::vector<DistributedTensor> xs;
      for (int node = 0; node < 4; ++node) xs.push_back(Tensor::full({count}, inputs[node], dt).dist_send(node));
      all_reduce(xs, ReduceOp::Sum);
      const Tensor first = xs[0].get();
      for (float v : first.to(kFloat32).to_vector<float>()) {
        ASSERT_NEAR(v, expected, 1e-3 * std::abs(expected)) << "16-bit partial sums were rounded before the end";
      }
      for (int node = 1; node < 4; ++node) {
        EXPECT_TRUE(same_tensor(xs[static_cast<size_t>(node)].get(), first)) << "node " << node << " differs";
      }
    }
  }
}

}  // namespace
}  // namespace thd::test
