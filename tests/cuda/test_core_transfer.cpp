// Copies between host and device and within devices: Tensor::to / cuda / cpu /
// copy_, the creation functions on a device, and reading CUDA tensors on the host.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <thd/cuda.h>
#include <thd/memory.h>
#include <thd/tensor.h>

#include "cuda_test_util.h"
#include "tensor/cuda/pinned_allocator.h"

namespace thd {
namespace {

using testing::expect_matches_cpu;
using testing::random_cpu;

constexpr DType kAllDTypes[] = {kBool,    kUInt8,    kInt8,    kInt32,  kInt64,
                                kFloat16, kBFloat16, kFloat32, kFloat64};

// Exact equality of two CPU tensors, bit for bit.
void expect_same_bytes(const Tensor& got, const Tensor& want) {
  ASSERT_TRUE(got.device().is_cpu());
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  const Tensor g = got.contiguous(), w = want.contiguous();
  EXPECT_EQ(std::memcmp(g.data_ptr(), w.data_ptr(), g.nbytes()), 0)
      << "contents differ for " << want.dtype() << " " << shape_str(want.shape());
}

TEST(CudaTransfer, RoundTripEveryDTypeAndShape) {
  THD_REQUIRE_CUDA();
  const std::vector<Shape> shapes = {{}, {0}, {3, 0}, {1}, {7}, {33, 65}, {2, 3, 4}, {70000}};
  for (DType dt : kAllDTypes) {
    for (const Shape& shape : shapes) {
      const Tensor host = random_cpu(shape, dt);
      const Tensor dev = host.cuda();
      ASSERT_EQ(dev.device(), Device::cuda(0));
      ASSERT_EQ(dev.dtype(), dt);
      ASSERT_EQ(dev.shape(), shape);
      const Tensor back = dev.cpu();
      ASSERT_TRUE(back.device().is_cpu());
      expect_same_bytes(back, host);
    }
  }
}

// Larger than several staging chunks and not a multiple of one.
TEST(CudaTransfer, LargeRoundTrip) {
  THD_REQUIRE_CUDA();
  const int64_t n = (int64_t{33} << 20) / 4 + 3;
  const Tensor host = random_cpu({n}, kFloat32);
  expect_same_bytes(host.cuda().cpu(), host);
  const Tensor bytes = random_cpu({(int64_t{17} << 20) + 1}, kUInt8);
  expect_same_bytes(bytes.to(Device::cuda(0)).to(Device::cpu()), bytes);
}

// A copy to the device returns once the source was read: the host may overwrite
// the source at once.
TEST(CudaTransfer, HostSourceIsFreeOnReturn) {
  THD_REQUIRE_CUDA();
  const Tensor original = random_cpu({int64_t{10} << 20}, kInt32);  // 40 MiB: 3 chunks
  Tensor source = original.clone();
  const Tensor dev = source.cuda();
  source.fill_(0);
  expect_same_bytes(dev.cpu(), original);
}

TEST(CudaTransfer, NonContiguousBothWays) {
  THD_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kInt64, kBFloat16, kUInt8}) {
    const Tensor base = random_cpu({37, 53}, dt);
    const Tensor host_t = base.t();                       // transposed host source
    expect_same_bytes(host_t.cuda().cpu(), host_t.contiguous());
    const Tensor stepped = base.slice(1, 1, 53, 3);       // strided host source
    expect_same_bytes(stepped.cuda().cpu(), stepped.contiguous());
    const Tensor dev = base.cuda();
    expect_same_bytes(dev.t().cpu(), host_t.contiguous());  // transposed device source
    expect_same_bytes(dev.slice(0, 2, 30, 4).cpu(), base.slice(0, 2, 30, 4).contiguous());
    // Into a non-contiguous destination on the device.
    Tensor dst = Tensor::zeros({53, 37}, dt, Device::cuda(0)).t();
    dst.copy_(base);
    expect_same_bytes(dst.cpu(), base);
    // ... and on the host.
    Tensor host_dst = Tensor::zeros({53, 37}, dt).t();
    host_dst.copy_(dev);
    expect_same_bytes(host_dst, base);
  }
}

TEST(CudaTransfer, BroadcastSources) {
  THD_REQUIRE_CUDA();
  const Tensor row = random_cpu({1, 5}, kFloat32);
  Tensor dst = Tensor::empty({1000, 5}, kFloat32, Device::cuda(0));
  dst.copy_(row);
  expect_same_bytes(dst.cpu(), row.expand({1000, 5}));
  // An expanded host tensor crosses as its few real elements.
  Tensor dst2 = Tensor::empty({300, 7}, kFloat64, Device::cuda(0));
  const Tensor col = random_cpu({300, 1}, kFloat32);
  dst2.copy_(col.expand({300, 7}));
  expect_same_bytes(dst2.cpu(), col.expand({300, 7}).to(kFloat64));
  // Device source broadcast into a host destination.
  Tensor host_dst = Tensor::empty({4, 6, 5});
  host_dst.copy_(row.cuda());
  expect_same_bytes(host_dst, row.expand({4, 6, 5}).contiguous());
}

TEST(CudaTransfer, DTypeConvertingCopies) {
  THD_REQUIRE_CUDA();
  const Shape shape = {129, 31};
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      const Tensor host = random_cpu(shape, from);
      const Tensor want = host.to(to);
      // Host to device, converting.
      Tensor d = Tensor::empty(shape, to, Device::cuda(0));
      d.copy_(host);
      expect_same_bytes(d.cpu(), want);
      // Device to host, converting.
      Tensor h = Tensor::empty(shape, to);
      h.copy_(host.cuda());
      expect_same_bytes(h, want);
      // Within the device, converting; and to(dtype) of a CUDA tensor.
      const Tensor on_device = host.cuda().to(to);
      ASSERT_TRUE(on_device.device().is_cuda());
      expect_same_bytes(on_device.cpu(), want);
    }
  }
}

TEST(CudaTransfer, ToDeviceReturnsSelfUnlessCopy) {
  THD_REQUIRE_CUDA();
  const Tensor dev = Tensor::ones({4}, kFloat32, Device::cuda(0));
  EXPECT_TRUE(dev.cuda().shares_storage(dev));
  EXPECT_TRUE(dev.to(Device::cuda(0)).shares_storage(dev));
  const Tensor copied = dev.to(Device::cuda(0), /*copy=*/true);
  EXPECT_FALSE(copied.shares_storage(dev));
  EXPECT_EQ(copied.cpu().to_vector<float>(), std::vector<float>(4, 1.0f));
  const Tensor host = Tensor::ones({4});
  EXPECT_TRUE(host.cpu().shares_storage(host));
}

TEST(CudaTransfer, CloneContiguousAndReshapeStayOnTheDevice) {
  THD_REQUIRE_CUDA();
  const Tensor host = random_cpu({6, 10}, kFloat32);
  const Tensor dev = host.cuda();
  const Tensor c = dev.clone();
  EXPECT_TRUE(c.device().is_cuda());
  EXPECT_FALSE(c.shares_storage(dev));
  expect_same_bytes(c.cpu(), host);
  const Tensor t = dev.t().contiguous();
  EXPECT_TRUE(t.device().is_cuda());
  EXPECT_TRUE(t.is_contiguous());
  expect_same_bytes(t.cpu(), host.t().contiguous());
  const Tensor r = dev.t().reshape({60});
  EXPECT_TRUE(r.device().is_cuda());
  expect_same_bytes(r.cpu(), host.t().reshape({60}));
  expect_matches_cpu(dev.slice(1, 0, 10, 2), host.slice(1, 0, 10, 2));
}

TEST(CudaTransfer, CopyWithinADevice) {
  THD_REQUIRE_CUDA();
  const Tensor host = random_cpu({1000, 33}, kFloat32);
  const Tensor src = host.cuda();
  Tensor dst = Tensor::empty({1000, 33}, kFloat32, Device::cuda(0));
  dst.copy_(src);  // same dtype, both contiguous: a device memcpy
  expect_same_bytes(dst.cpu(), host);
  // Overlapping source and destination: read before written.
  Tensor v = host.cuda();
  v.slice(0, 1, 1000).copy_(v.slice(0, 0, 999));
  Tensor want = host.clone();
  want.slice(0, 1, 1000).copy_(host.slice(0, 0, 999));
  expect_same_bytes(v.cpu(), want);
}

TEST(CudaTransfer, BetweenDevices) {
  THD_REQUIRE_CUDA();
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices, found " << cuda::device_count();
  const Tensor host = random_cpu({513, 77}, kFloat32);
  const Tensor a = host.cuda(0);
  const Tensor b = a.cuda(1);
  EXPECT_EQ(b.device(), Device::cuda(1));
  expect_same_bytes(b.cpu(), host);
  Tensor half = Tensor::empty({77, 513}, kFloat16, Device::cuda(1)).t();
  half.copy_(a);  // converting, into a non-contiguous destination, across devices
  expect_same_bytes(half.cpu(), host.to(kFloat16));
  Tensor back = Tensor::empty({513, 77}, kFloat64, Device::cuda(0));
  back.copy_(half);
  expect_same_bytes(back.cpu(), host.to(kFloat16).to(kFloat64));
}

TEST(CudaTransfer, ItemStrAndToVector) {
  THD_REQUIRE_CUDA();
  EXPECT_EQ(Tensor::full({}, 3.5, kFloat32, Device::cuda(0)).item<float>(), 3.5f);
  EXPECT_EQ(Tensor::full({1, 1}, -7, kInt64, Device::cuda(0)).item().to_int64(), -7);
  EXPECT_TRUE(Tensor::full({1}, true, kBool, Device::cuda(0)).item<bool>());
  EXPECT_EQ(Tensor::full({1}, 1.5, kBFloat16, Device::cuda(0)).item<double>(), 1.5);
  EXPECT_THROW(Tensor::zeros({2}, kFloat32, Device::cuda(0)).item(), ValueError);

  const Tensor host = Tensor::arange(12).reshape({3, 4});
  const Tensor dev = host.cuda();
  EXPECT_EQ(dev.to_vector<int64_t>(), host.to_vector<int64_t>());
  EXPECT_EQ(dev.t().to_vector<double>(), host.t().to_vector<double>());
  EXPECT_EQ(dev.to_vector<float>(), host.to_vector<float>());
  const std::string s = dev.str();
  std::string want = host.str();
  want.insert(want.size() - 1, ", device=cuda:0");
  EXPECT_EQ(s, want);
  std::ostringstream os;
  os << dev.to(kFloat16);
  EXPECT_NE(os.str().find("dtype=float16, device=cuda:0"), std::string::npos) << os.str();
  const Tensor big = random_cpu({40, 50}, kFloat32);  // summarised
  std::string big_want = big.str();
  big_want.insert(big_want.size() - 1, ", device=cuda:0");
  EXPECT_EQ(big.cuda().str(), big_want);
}

TEST(CudaTransfer, CreationOnTheDevice) {
  THD_REQUIRE_CUDA();
  const Device dev = Device::cuda(0);
  for (DType dt : kAllDTypes) {
    const Scalar value = dt == kBool ? Scalar(true) : is_floating_point(dt) ? Scalar(-2.75) : Scalar(7);
    for (const Shape& shape : std::vector<Shape>{{}, {0}, {5, 7}, {100001}}) {
      const Tensor e = Tensor::empty(shape, dt, dev);
      EXPECT_EQ(e.device(), dev);
      EXPECT_EQ(e.shape(), shape);
      EXPECT_EQ(e.dtype(), dt);
      expect_same_bytes(Tensor::zeros(shape, dt, dev).cpu(), Tensor::zeros(shape, dt));
      expect_same_bytes(Tensor::ones(shape, dt, dev).cpu(), Tensor::ones(shape, dt));
      expect_same_bytes(Tensor::full(shape, value, dt, dev).cpu(), Tensor::full(shape, value, dt));
    }
  }
  // zeros writes every byte of a reused block that held something else.
  for (int i = 0; i < 3; ++i) {
    { testing::poisoned_cuda({4099}, kFloat32); }
    expect_same_bytes(Tensor::zeros({4099}, kFloat32, dev).cpu(), Tensor::zeros({4099}));
  }
  // fill_ of a strided view writes just the view.
  Tensor t = Tensor::zeros({6, 8}, kInt32, dev);
  t.slice(1, 0, 8, 2).fill_(3);
  Tensor want = Tensor::zeros({6, 8}, kInt32);
  want.slice(1, 0, 8, 2).fill_(3);
  expect_same_bytes(t.cpu(), want);
  // The value is checked before anything runs.
  EXPECT_THROW(Tensor::zeros({3}, kUInt8, dev).fill_(300), ValueError);
  EXPECT_THROW(Tensor::full({3}, 1e6, kInt8, dev), ValueError);
}

// Transfers after the first reuse their pinned staging buffers and device blocks.
TEST(CudaTransfer, RepeatedTransfersAllocateNothingNew) {
  THD_REQUIRE_CUDA();
  const Tensor host = random_cpu({int64_t{10} << 20}, kFloat32);  // 40 MiB
  Tensor back = Tensor::empty({int64_t{10} << 20});
  // One transfer at a time: a copy back started while the last chunks of the copy
  // there are in flight would take staging buffers of its own (still no more than
  // the cache then keeps), which makes the count depend on timing.
  auto round_trip = [&] {
    const Tensor dev = host.cuda();
    cuda::synchronize(0);
    back.copy_(dev);
  };
  round_trip();  // warm-up
  const MemoryStats pinned = cuda::detail::pinned_memory_stats();
  const MemoryStats device = memory_stats(Device::cuda(0));
  for (int i = 0; i < 5; ++i) {
    back.fill_(0);
    round_trip();
    expect_same_bytes(back, host);
  }
  EXPECT_EQ(cuda::detail::pinned_memory_stats().num_device_allocs, pinned.num_device_allocs);
  EXPECT_GT(cuda::detail::pinned_memory_stats().num_cache_hits, pinned.num_cache_hits);
  EXPECT_EQ(memory_stats(Device::cuda(0)).num_device_allocs, device.num_device_allocs);
}

}  // namespace
}  // namespace thd
