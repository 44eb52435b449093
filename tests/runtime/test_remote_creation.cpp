// Making tensors on workers: constructors and typed aliases, the factories against
// the local library, uploads (contiguous or not, every dtype, empty), item(), and
// random tensors that are reproducible per seed and node.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include <thd/distributed.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class RemoteCreation : public JobTest<2> {};

TEST_F(RemoteCreation, ConstructorsAndTypedAliases) {
  DistributedTensor plain({2, 3});
  EXPECT_EQ(plain.dtype(), kFloat32);
  EXPECT_EQ(plain.shape(), (Shape{2, 3}));
  EXPECT_EQ(plain.strides(), (Shape{3, 1}));
  EXPECT_EQ(plain.node(), 0);
  EXPECT_EQ(plain.device(), Device::cpu());
  EXPECT_EQ(plain.numel(), 6);
  EXPECT_EQ(plain.nbytes(), 24u);
  EXPECT_EQ(plain.size(-1), 3);
  EXPECT_EQ(plain.sizes(), (Shape{2, 3}));
  EXPECT_EQ(plain.element_size(), 4u);
  EXPECT_EQ(plain.dim(), 2);
  EXPECT_TRUE(plain.is_contiguous());
  EXPECT_EQ(plain.get().shape(), (Shape{2, 3}));

  EXPECT_EQ(DistributedFloatTensor({1}).dtype(), kFloat32);
  EXPECT_EQ(DistributedDoubleTensor({1}).dtype(), kFloat64);
  EXPECT_EQ(DistributedHalfTensor({1}).dtype(), kFloat16);
  EXPECT_EQ(DistributedBFloat16Tensor({1}).dtype(), kBFloat16);
  EXPECT_EQ(DistributedLongTensor({1}).dtype(), kInt64);
  EXPECT_EQ(DistributedIntTensor({1}).dtype(), kInt32);
  EXPECT_EQ(DistributedCharTensor({1}).dtype(), kInt8);
  EXPECT_EQ(DistributedByteTensor({1}).dtype(), kUInt8);
  EXPECT_EQ(DistributedBoolTensor({1}).dtype(), kBool);

  // The DESIGN.md example: fill_ on a fresh typed tensor, chained.
  auto x = DistributedFloatTensor({20, 20}).fill_(4);
  EXPECT_TRUE(same_tensor(x.get(), Tensor::full({20, 20}, 4)));
  auto l = DistributedLongTensor({3}, Device::cpu());
  l.fill_(-7);
  EXPECT_TRUE(same_tensor(l.get(), Tensor::full({3}, -7, kInt64)));
  DistributedTensor e = DistributedTensor::empty({0, 4}, kInt32);
  EXPECT_TRUE(same_tensor(e.get(), Tensor::empty({0, 4}, kInt32)));
  // Ids are fresh per tensor; copies of a handle share it.
  DistributedTensor y = x;
  EXPECT_EQ(y.id(), x.id());
  EXPECT_NE(plain.id(), x.id());
  const std::string s = x.str();
  EXPECT_NE(s.find("float32"), std::string::npos) << s;
  EXPECT_NE(s.find("20, 20"), std::string::npos) << s;
  EXPECT_NE(s.find("node=0"), std::string::npos) << s;
  std::ostringstream printed;
  printed << x;
  EXPECT_EQ(printed.str(), s);
}

TEST_F(RemoteCreation, FactoriesMatchTheLocalLibrary) {
  for (DType dt : {kBool, kUInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    EXPECT_TRUE(matches(DistributedTensor::zeros({2, 3}, dt), Tensor::zeros({2, 3}, dt), 0));
    EXPECT_TRUE(matches(DistributedTensor::ones({4}, dt), Tensor::ones({4}, dt), 0));
    EXPECT_TRUE(matches(DistributedTensor::full({3, 1}, 2.5, dt), Tensor::full({3, 1}, 2.5, dt), 0));
    EXPECT_TRUE(matches(DistributedTensor::full({}, -1, dt), Tensor::full({}, -1, dt), 0));
    EXPECT_TRUE(matches(DistributedTensor::eye(3, -1, dt), Tensor::eye(3, -1, dt), 0));
    EXPECT_TRUE(matches(DistributedTensor::eye(2, 4, dt), Tensor::eye(2, 4, dt), 0));
  }
  EXPECT_TRUE(matches(DistributedTensor::zeros({2, 2}), Tensor::zeros({2, 2}), 0));
  EXPECT_TRUE(matches(DistributedTensor::arange(10), Tensor::arange(10), 0));
  EXPECT_TRUE(matches(DistributedTensor::arange(2.5), Tensor::arange(2.5), 0));
  EXPECT_TRUE(matches(DistributedTensor::arange(3, 11, 2), Tensor::arange(3, 11, 2), 0));
  EXPECT_TRUE(matches(DistributedTensor::arange(1, -2, -0.5), Tensor::arange(1, -2, -0.5), 0));
  EXPECT_TRUE(matches(DistributedTensor::arange(0, 5, 1, kFloat64), Tensor::arange(0, 5, 1, kFloat64), 0));
  EXPECT_TRUE(matches(DistributedTensor::arange(7, kInt32), Tensor::arange(7, kInt32), 0));
  EXPECT_TRUE(matches(DistributedTensor::linspace(-1, 1, 9), Tensor::linspace(-1, 1, 9), 0));
  EXPECT_TRUE(matches(DistributedTensor::linspace(0, 10, 6, kInt64), Tensor::linspace(0, 10, 6, kInt64), 0));
  EXPECT_TRUE(matches(DistributedTensor::linspace(3, 3, 1, kFloat64), Tensor::linspace(3, 3, 1, kFloat64), 0));
  EXPECT_TRUE(matches(DistributedTensor::eye(1), Tensor::eye(1), 0));
}

TEST_F(RemoteCreation, BadFactoryArgumentsThrowAtTheCallSite) {
  EXPECT_THROW(DistributedTensor::zeros({2, -1}), Error);
  EXPECT_THROW(DistributedTensor::arange(0, 5, 0), Error);
  EXPECT_THROW(DistributedTensor::linspace(0, 1, -1), Error);
  EXPECT_THROW(DistributedTensor::eye(-2), Error);
  EXPECT_THROW(DistributedTensor::randint(5, 5, {3}), Error);
  EXPECT_THROW(DistributedTensor::rand({2}, kInt64), Error);
  EXPECT_THROW(DistributedTensor({-3}), Error);
}

TEST_F(RemoteCreation, UploadsRoundTripEveryDtype) {
  for (DType dt : {kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({3, 5}, dt, 1);
    EXPECT_TRUE(matches(DistributedTensor::from(a), a, 0));
    EXPECT_TRUE(matches(a.dist_send(), a, 0));
    EXPECT_TRUE(matches(a.dist_send(1), a, 1));
    // A non-contiguous local tensor arrives as its elements, contiguous.
    const Tensor strided = a.t().slice(0, 0, 5, 2);
    EXPECT_TRUE(matches(DistributedTensor::from(strided), strided.contiguous(), 0));
  }
  const Tensor scalar = Tensor::full({}, 42, kInt64);
  DistributedTensor r = scalar.dist_send();
  EXPECT_EQ(r.dim(), 0);
  EXPECT_EQ(r.item<int64_t>(), 42);
  EXPECT_TRUE(matches(Tensor::zeros({0}).dist_send(), Tensor::zeros({0}), 0));
  // A larger upload than one batch holds (MasterWorkerOptions::batch_bytes is 64 KiB).
  const Tensor big = Tensor::arange(0, 300000, 1, kFloat32).view({300, 1000});
  EXPECT_TRUE(matches(big.dist_send(1), big, 1));
  // The upload is a copy: changing the local tensor afterwards changes nothing remote.
  Tensor local = Tensor::ones({4});
  DistributedTensor up = local.dist_send();
  local.fill_(9);
  EXPECT_TRUE(same_tensor(up.get(), Tensor::ones({4})));
}

// Draws from node `node` after seeding every node with `seed`.
std::vector<Tensor> draws(uint64_t seed, int node) {
  manual_seed_all(seed);
  NodeScope on(node);
  return {DistributedTensor::rand({64}).get(), DistributedTensor::randn({8, 8}, kFloat64).get(),
          DistributedTensor::randint(-5, 5, {64}).get(), DistributedTensor::rand({16}).get()};
}

bool same_values(const Tensor& a, const Tensor& b) { return a.dtype() == b.dtype() && values(a) == values(b); }

TEST_F(RemoteCreation, RandomTensorsAreReproduciblePerSeedAndNode) {
  const std::vector<Tensor> first0 = draws(1234, 0);
  const std::vector<Tensor> first1 = draws(1234, 1);
  const std::vector<Tensor> again0 = draws(1234, 0);
  const std::vector<Tensor> again1 = draws(1234, 1);
  const std::vector<Tensor> other0 = draws(99, 0);
  for (size_t i = 0; i < first0.size(); ++i) {
    SCOPED_TRACE("draw " + std::to_string(i));
    EXPECT_TRUE(same_values(first0[i], again0[i])) << "node 0 does not repeat its draws for the same seed";
    EXPECT_TRUE(same_values(first1[i], again1[i])) << "node 1 does not repeat its draws for the same seed";
    EXPECT_FALSE(same_values(first0[i], first1[i])) << "nodes 0 and 1 draw the same numbers";
    EXPECT_FALSE(same_values(first0[i], other0[i])) << "seeds 1234 and 99 draw the same numbers";
  }
  // Successive draws differ (the generator advances).
  EXPECT_FALSE(same_values(first0[0].slice(0, 0, 16), first0[3]));
  // Seeding one node does not depend on what the other nodes drew in between.
  manual_seed_all(1234);
  {
    NodeScope on(1);
    for (int i = 0; i < 3; ++i) DistributedTensor::rand({100});
  }
  EXPECT_TRUE(same_values(DistributedTensor::rand({64}).get(), first0[0]));
}

TEST_F(RemoteCreation, RandomTensorsHaveTheirDistributions) {
  manual_seed_all(7);
  const Tensor u = DistributedTensor::rand({20000}, kFloat64).get();
  EXPECT_GE(u.min().item<double>(), 0.0);
  EXPECT_LT(u.max().item<double>(), 1.0);
  EXPECT_NEAR(u.mean().item<double>(), 0.5, 0.02);
  const Tensor n = DistributedTensor::randn({20000}).get();
  EXPECT_EQ(n.dtype(), kFloat32);
  EXPECT_NEAR(n.mean().item<double>(), 0.0, 0.05);
  EXPECT_NEAR(n.std().item<double>(), 1.0, 0.05);
  const Tensor k = DistributedTensor::randint(-3, 4, {5000}, kInt32).get();
  EXPECT_EQ(k.dtype(), kInt32);
  EXPECT_EQ(k.min().item<int64_t>(), -3);
  EXPECT_EQ(k.max().item<int64_t>(), 3);
}

}  // namespace
}  // namespace thd::test
