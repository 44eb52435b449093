// Devices of DistributedTensors that need no GPU: DeviceScope (nested, per thread),
// explicit devices on creation, the master's device inference (results on their
// operands' device, mixed devices refused at the call site with the tensor library's
// own error) and a GPU a worker does not have, which its worker answers with a
// RemoteError naming the node, the device and the GPUs it has, and survives. Where
// the workers have GPUs the "missing" GPU is the one past their last.
// tests/cuda/test_runtime_cuda.cpp runs tensors on a real GPU.
#include <gtest/gtest.h>

#include <latch>
#include <string>
#include <thread>

#include <thd/cuda.h>
#include <thd/distributed.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class Devices : public JobTest<2> {
 protected:
  // The GPUs every worker has (they run on this host) and a device none of them has.
  static int gpus() { return stats().at(0).cuda_devices; }
  static Device missing() { return Device::cuda(gpus()); }
};

// What a worker says about a GPU it lacks, for `gpus` GPUs.
std::string lacks(Device device, int gpus) {
  return "has no device " + device.str() + ": its worker has " + std::to_string(gpus) + " GPU";
}

// get() of `t` raises a RemoteError for `op` ("": any) on `node` whose message holds
// `needle`.
::testing::AssertionResult raises(const DistributedTensor& t, const std::string& op, int node,
                                  const std::string& needle) {
  try {
    Tensor got = t.get();
    return ::testing::AssertionFailure() << "get() returned " << got.str() << " instead of raising";
  } catch (const RemoteError& e) {
    const std::string what = e.what();
    if (!op.empty() && e.context().op != op) return ::testing::AssertionFailure() << "op '" << e.context().op << "': " << what;
    if (e.context().node != node) return ::testing::AssertionFailure() << "node " << e.context().node << ": " << what;
    if (what.find(needle) == std::string::npos) {
      return ::testing::AssertionFailure() << "'" << what << "' does not say '" << needle << "'";
    }
    return ::testing::AssertionSuccess();
  } catch (...) {
    return ::testing::AssertionFailure() << "get() threw " << error_type(std::current_exception()) << ": "
                                         << error_text(std::current_exception());
  }
}

TEST_F(Devices, WorkersReportTheirGpus) {
  for (const NodeStats& n : stats()) {
    EXPECT_EQ(n.cuda_devices, cuda::device_count()) << "node " << n.node << " runs on this host";
    ASSERT_EQ(n.devices.size(), static_cast<size_t>(n.cuda_devices));
    for (size_t i = 0; i < n.devices.size(); ++i) {
      EXPECT_EQ(n.devices[i].index, static_cast<int>(i));
      EXPECT_EQ(n.devices[i].in_use, 0) << "no tensor of this session is on a GPU";
    }
  }
}

TEST_F(Devices, DeviceScopesNestAndRestore) {
  const Device gpu = missing();
  EXPECT_EQ(current_device(), Device::cpu());
  EXPECT_EQ(DistributedTensor::zeros({2}).device(), Device::cpu());
  {
    DeviceScope on(gpu);
    EXPECT_EQ(current_device(), gpu);
    {
      DeviceScope back(Device::cpu());
      EXPECT_EQ(current_device(), Device::cpu());
      // Inside: a CPU tensor, which works.
      EXPECT_TRUE(same_tensor(DistributedTensor::ones({2}).get(), Tensor::ones({2})));
    }
    EXPECT_EQ(current_device(), gpu);
    NodeScope node1(1);
    // Every creation follows the scope, and so do uploads. (None of them can be made:
    // the first one's error is raised below.)
    const Tensor local = Tensor::ones({2});
    const DistributedTensor made[] = {DistributedTensor({2}),
                                      DistributedFloatTensor({2}),
                                      DistributedTensor::empty({2}),
                                      DistributedTensor::zeros({2}),
                                      DistributedTensor::full({2}, 3),
                                      DistributedTensor::arange(4),
                                      DistributedTensor::linspace(0, 1, 3),
                                      DistributedTensor::eye(2),
                                      DistributedTensor::rand({2}),
                                      DistributedTensor::randn({2}),
                                      DistributedTensor::randint(0, 3, {2}),
                                      DistributedTensor::from(local),
                                      local.dist_send()};
    for (const DistributedTensor& t : made) {
      EXPECT_EQ(t.device(), gpu) << t;
      EXPECT_EQ(t.node(), 1);
      EXPECT_TRUE(t.is_cuda());
      EXPECT_TRUE(raises(t, "", 1, lacks(gpu, gpus()))) << t;  // each failed on its own
    }
    EXPECT_TRUE(raises(made[3], "zeros", 1, lacks(gpu, gpus())));
    EXPECT_TRUE(raises(made[11], "dist_send", 1, lacks(gpu, gpus())));
    // An explicit device beats the scope.
    EXPECT_EQ(DistributedTensor::zeros({2}, kInt64, Device::cpu()).device(), Device::cpu());
    EXPECT_TRUE(same_tensor(DistributedTensor::from(local, 0, Device::cpu()).get(), local));
    EXPECT_TRUE(same_tensor(DistributedTensor({2}, kInt32, Device::cpu()).fill_(7).get(), Tensor::full({2}, 7, kInt32)));
  }
  EXPECT_EQ(current_device(), Device::cpu());
  EXPECT_EQ(DistributedTensor::arange(3).device(), Device::cpu());
  EXPECT_NO_THROW(synchronize()) << "every failed creation was raised above";
}

TEST_F(Devices, ScopesArePerThread) {
  const Device gpu = missing();
  std::latch scoped(1);
  std::latch checked(1);
  Device in_thread = Device::cpu();
  std::thread other([&] {
    DeviceScope on(gpu);
    in_thread = current_device();
    scoped.count_down();
    checked.wait();
  });
  scoped.wait();
  EXPECT_EQ(current_device(), Device::cpu()) << "another thread's DeviceScope moved this thread";
  EXPECT_EQ(DistributedTensor::ones({1}).device(), Device::cpu());
  checked.count_down();
  other.join();
  EXPECT_EQ(in_thread, gpu);
}

TEST_F(Devices, ANegativeGpuIndexIsRefusedAtTheCallSite) {
  EXPECT_THROW(DeviceScope(Device::cuda(-1)), ValueError);
  EXPECT_EQ(current_device(), Device::cpu()) << "a refused scope must not change the device";
  DistributedTensor x = DistributedTensor::ones({2});
  EXPECT_THROW(x.cuda(-1), ValueError);
  EXPECT_THROW(x.to(Device::cuda(-2)), ValueError);
  EXPECT_THROW(DistributedTensor::zeros({2}, kFloat32, Device::cuda(-1)), ValueError);
  EXPECT_THROW(DistributedTensor::from(Tensor::ones({2}), 0, Device::cuda(-1)), ValueError);
}

TEST_F(Devices, AGpuTheWorkerLacksIsARemoteErrorNamingNodeDeviceAndGpus) {
  const int n = gpus();
  const Device gpu = missing();
  for (int node : {0, 1}) {
    SCOPED_TRACE("node " + std::to_string(node));
    NodeScope on(node);
    DistributedTensor x = Tensor::arange(6, kFloat32).dist_send();
    DistributedTensor moved = gpu.index() == 0 ? x.cuda() : x.cuda(gpu.index());
    EXPECT_EQ(moved.device(), gpu);
    EXPECT_EQ(moved.node(), node);
    EXPECT_TRUE(raises(moved, "to", node, lacks(gpu, n)));
    if (n == 0) {
      EXPECT_TRUE(raises(moved, "to", node, "0 GPUs"));
    }
    // Made there directly, and uploaded there: the upload's bytes are taken and
    // dropped, so the node's next commands still find their own.
    EXPECT_TRUE(raises(DistributedTensor::zeros({3}, kFloat32, gpu), "zeros", node, lacks(gpu, n)));
    EXPECT_TRUE(raises(DistributedTensor::randn({3}, kFloat32, gpu), "randn", node, lacks(gpu, n)));
    const Tensor big = Tensor::arange(1 << 18, kFloat32);  // past one frame of the channel
    EXPECT_TRUE(raises(DistributedTensor::from(big, node, gpu), "dist_send", node, lacks(gpu, n)));
    // The worker survived, and its tensors are intact.
    EXPECT_TRUE(same_tensor(x.get(), Tensor::arange(6, kFloat32)));
    EXPECT_TRUE(same_tensor(DistributedTensor::from(big).sum().get(), big.sum()));
  }
  EXPECT_NO_THROW(synchronize());
}

TEST_F(Devices, ThePoisonOfAFailedPlacementFollowsCopiesAndOps) {
  const Device gpu = missing();
  DistributedTensor bad = DistributedTensor::ones({4}, kFloat32, gpu);
  // Metadata is known on the master: the results of ops on it are on its device.
  DistributedTensor y = (bad * 2 + 1).relu();
  DistributedTensor moved = bad.to_node(1);
  EXPECT_EQ(y.device(), gpu);
  EXPECT_EQ(moved.device(), gpu) << "to_node keeps the device index";
  EXPECT_EQ(moved.node(), 1);
  EXPECT_EQ(bad.cpu().device(), Device::cpu());
  EXPECT_TRUE(raises(moved, "ones", 0, lacks(gpu, gpus())));
  EXPECT_TRUE(raises(y.sum(), "ones", 0, lacks(gpu, gpus())));
  EXPECT_TRUE(raises(bad.cpu(), "ones", 0, lacks(gpu, gpus())));
  // copy_ across devices is allowed (torch's copy_): from the poisoned tensor it
  // poisons the target with the original error.
  DistributedTensor target = DistributedTensor::zeros({4});
  target.copy_(bad);
  EXPECT_TRUE(raises(target, "ones", 0, lacks(gpu, gpus())));
  EXPECT_NO_THROW(synchronize());
}

TEST_F(Devices, ResultsStayOnTheirOperandsDeviceWhateverTheScope) {
  const Device gpu = missing();
  DistributedTensor g = DistributedTensor::rand({3, 4}, kFloat32, gpu);
  DistributedTensor i = DistributedTensor::zeros({2}, kInt64, gpu);
  DeviceScope on(Device::cpu());
  const std::vector<DistributedTensor> results = {
      g + g, g * 2.0, 2.0 - g, g.exp(), g.t(), g.view({12}), g.reshape({4, 3}), g.slice(1, 0, 2), g.select(0, 1),
      g.unsqueeze(0), g.expand({2, 3, 4}), g.t().contiguous(), g.clone(), g.to(kFloat64), g.sum(), g.sum({1}),
      g.argmax(1), g.norm(), g.softmax(1), g.matmul(g.t()), g.index_select(0, i), g.clamp(0.1, 0.5),
      g.split(2, 1)[1], g.sort().first, g.sort().second, g.topk(2).first, cat({g, g}), stack({g, g}),
      where(g.gt(0.5), g, g), where(g.gt(0.5), 1.0, 0.0), g.masked_fill(g.gt(0.5), 0), g.to_node(1)};
  for (const DistributedTensor& r : results) EXPECT_EQ(r.device(), gpu) << r;
  // In place: still there.
  g.add_(1);
  g.mul_(g);
  EXPECT_EQ(g.device(), gpu);
  EXPECT_TRUE(raises(results.back(), "rand", 0, lacks(gpu, gpus())));
  EXPECT_TRUE(raises(i, "zeros", 0, lacks(gpu, gpus())));
  EXPECT_NO_THROW(synchronize());
}

TEST_F(Devices, MixedDevicesFailAtTheCallSiteWithTheTensorLibrarysError) {
  const Device gpu = missing();
  DistributedTensor c = DistributedTensor::ones({2, 2});
  DistributedTensor g = DistributedTensor::ones({2, 2}, kFloat32, gpu);
  DistributedTensor gi = DistributedTensor::zeros({2}, kInt64, gpu);
  const std::string mixed = "expected all tensors on one device, got cpu and " + gpu.str();
  auto expect_mixed = [&](const char* what, auto&& call, const std::string& message) {
    try {
      call();
      ADD_FAILURE() << what << ": no error at the call site";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << what << ": " << e.what();
      EXPECT_EQ(e.context().node, 0) << what << ": the error names the node";
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": " << error_type(std::current_exception()) << ": " << e.what();
    }
  };
  const std::string reversed = "expected all tensors on one device, got " + gpu.str() + " and cpu";
  expect_mixed("add", [&] { return c + g; }, mixed);
  expect_mixed("add (reversed)", [&] { return g + c; }, reversed);
  expect_mixed("add_", [&] { return c.add_(g); }, mixed);
  expect_mixed("matmul", [&] { return c.matmul(g); }, mixed);
  expect_mixed("index_select", [&] { return c.index_select(0, gi); }, mixed);
  expect_mixed("masked_fill", [&] { return g.masked_fill(c.gt(0), 1); }, reversed);
  expect_mixed("where", [&] { return where(c.gt(0), c, g); }, mixed);
  expect_mixed("addmm", [&] { return c.addmm(c, g); }, mixed);
  expect_mixed("cat", [&] { return cat({c, g}); }, mixed);
  expect_mixed("stack", [&] { return stack({g, c}); }, reversed);
  // The same calls on one device are fine: the device moved explicitly.
  DistributedTensor moved = c.to(gpu);
  EXPECT_EQ((moved + g).device(), gpu);
  EXPECT_EQ(cat({c, g.cpu()}).device(), Device::cpu());
  EXPECT_TRUE(raises(moved, "to", 0, lacks(gpu, gpus())));
  EXPECT_TRUE(raises(g, "ones", 0, lacks(gpu, gpus())));
  EXPECT_TRUE(raises(gi, "zeros", 0, lacks(gpu, gpus())));
  EXPECT_TRUE(same_tensor(c.get(), Tensor::ones({2, 2})));
  EXPECT_NO_THROW(synchronize());
}

TEST_F(Devices, MovingToTheDeviceATensorIsOnReturnsIt) {
  DistributedTensor x = DistributedTensor::arange(5);
  EXPECT_EQ(x.cpu().id(), x.id());
  EXPECT_EQ(x.to(Device::cpu()).id(), x.id());
  DistributedTensor copy = x.to(Device::cpu(), /*copy=*/true);
  EXPECT_NE(copy.id(), x.id());
  x.add_(10);  // a copy: not the same storage
  EXPECT_TRUE(same_tensor(copy.get(), Tensor::arange(5)));
  EXPECT_TRUE(same_tensor(x.get(), Tensor::arange(5) + 10));
  // A strided view comes back contiguous.
  DistributedTensor v = DistributedTensor::arange(12).view({3, 4}).t().to(Device::cpu(), true);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_TRUE(same_tensor(v.get(), Tensor::arange(12).view({3, 4}).t().contiguous()));
}

}  // namespace
}  // namespace thd::test
