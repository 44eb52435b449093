#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include <thd/memory.h>
#include <thd/tensor.h>

#include "tensor/reference.h"

namespace thd {
namespace {

using test::close;
using test::values;

class CreationByDType : public ::testing::TestWithParam<DType> {};

TEST_P(CreationByDType, ZerosOnesFullEye) {
  DType dt = GetParam();
  Tensor z = Tensor::zeros({2, 3}, dt);
  EXPECT_EQ(z.dtype(), dt);
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(values(z), std::vector<double>(6, 0.0));
  EXPECT_EQ(values(Tensor::ones({4}, dt)), std::vector<double>(4, 1.0));
  Tensor f = Tensor::full({3}, 1, dt);
  EXPECT_EQ(values(f), std::vector<double>(3, 1.0));
  Tensor e = Tensor::eye(3, 4, dt);
  std::vector<double> want(12, 0.0);
  want[0] = want[5] = want[10] = 1;
  EXPECT_EQ(values(e), want);
  EXPECT_EQ(Tensor::empty({5, 0}, dt).numel(), 0);
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, CreationByDType, ::testing::ValuesIn(test::all_dtypes()),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Creation, FullConvertsValue) {
  EXPECT_EQ(values(Tensor::full({2}, 2.75, kInt32)), (std::vector<double>{2, 2}));
  EXPECT_EQ(values(Tensor::full({2}, -1.5, kFloat16)), (std::vector<double>{-1.5, -1.5}));
  EXPECT_EQ(values(Tensor::full({1}, 3, kBool)), (std::vector<double>{1}));
  EXPECT_EQ(Tensor::full({}, 7, kInt64).item<int64_t>(), 7);
  THD_EXPECT_THROW_MSG(Tensor::zeros({2, -1}), ValueError, "negative size -1");
  // Values that overflow the dtype are refused (torch's checked_convert), and the
  // tensor keeps its contents.
  Tensor i8 = Tensor::zeros({2}, kInt8);
  THD_EXPECT_THROW_MSG(i8.fill_(300), ValueError, "value 300 cannot be converted to type int8");
  EXPECT_EQ(values(i8), (std::vector<double>{0, 0}));
  THD_EXPECT_THROW_MSG(Tensor::full({1}, 1e6, kFloat16), ValueError, "without overflow");
  EXPECT_EQ(values(Tensor::full({1}, -1, kUInt8)), (std::vector<double>{255}));
}

TEST(Creation, Arange) {
  Tensor a = Tensor::arange(5);
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_EQ(values(a), (std::vector<double>{0, 1, 2, 3, 4}));
  Tensor b = Tensor::arange(1, 2, 0.25);
  EXPECT_EQ(b.dtype(), kFloat32);
  EXPECT_EQ(values(b), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(values(Tensor::arange(10, 0, -3)), (std::vector<double>{10, 7, 4, 1}));
  EXPECT_EQ(Tensor::arange(3, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(Tensor::arange(0).numel(), 0);
  // Exact for large int64 values that a double cannot hold.
  const int64_t big = (int64_t{1} << 60) + 1;
  EXPECT_EQ(Tensor::arange(big, big + 2).to_vector<int64_t>(), (std::vector<int64_t>{big, big + 1}));
  THD_EXPECT_THROW_MSG(Tensor::arange(0, 5, 0), ValueError, "step must be nonzero");
  THD_EXPECT_THROW_MSG(Tensor::arange(5, 0, 1), ValueError, "inconsistent with step sign");
  // Bounds near int64's limits: end - start and i * step overflow int64, the
  // elements do not.
  constexpr int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(Tensor::arange(lo, hi, hi).to_vector<int64_t>(), (std::vector<int64_t>{lo, -1, hi - 1}));
  EXPECT_EQ(Tensor::arange(hi, lo, lo + 1).to_vector<int64_t>(), (std::vector<int64_t>{hi, 0, lo + 1}));
  // A count no tensor can have is a ValueError naming the range, not a wrapped size.
  THD_EXPECT_THROW_MSG(Tensor::arange(lo, hi, 1), ValueError, "has too many elements");
  THD_EXPECT_THROW_MSG(Tensor::arange(0.0, 1e300, 1e-300), ValueError, "too many");
}

TEST(Creation, Linspace) {
  EXPECT_TRUE(close(Tensor::linspace(0, 1, 5), {0, 0.25, 0.5, 0.75, 1}));
  EXPECT_TRUE(close(Tensor::linspace(3, -3, 4, kFloat64), {3, 1, -1, -3}));
  EXPECT_EQ(values(Tensor::linspace(2, 5, 1)), (std::vector<double>{2}));
  EXPECT_EQ(Tensor::linspace(0, 1, 0).numel(), 0);
  EXPECT_EQ(values(Tensor::linspace(0, 10, 3, kInt32)), (std::vector<double>{0, 5, 10}));
  // The last value is exactly `end`.
  EXPECT_EQ(values(Tensor::linspace(0.1, 0.7, 7, kFloat64)).back(), 0.7);
  THD_EXPECT_THROW_MSG(Tensor::linspace(0, 1, -1), ValueError, "non-negative");
}

TEST(Creation, FromBlobWrapsWithoutCopy) {
  std::vector<float> buf = {1, 2, 3, 4, 5, 6};
  bool freed = false;
  {
    Tensor t = Tensor::from_blob(buf.data(), {2, 3}, kFloat32, {}, [&](void*) { freed = true; });
    EXPECT_EQ(t.data_ptr(), buf.data());
    t.mul_(2);
    Tensor col = Tensor::from_blob(buf.data(), {3}, kFloat32, {2});
    EXPECT_EQ(values(col), (std::vector<double>{2, 6, 10}));
  }
  EXPECT_TRUE(freed);
  EXPECT_EQ(buf[5], 12.0f);
  THD_EXPECT_THROW_MSG(Tensor::from_blob(nullptr, {2}, kFloat32), ValueError, "null");
  THD_EXPECT_THROW_MSG(Tensor::from_blob(buf.data(), {2}, kFloat32, {1, 1}), ShapeError, "lengths");
}

TEST(Creation, FromVector) {
  Tensor t = Tensor::from_vector<int32_t>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(t.dtype(), kInt32);
  EXPECT_EQ(values(t.t()), (std::vector<double>{1, 3, 2, 4}));
  EXPECT_EQ(Tensor::from_vector<double>({1.5}).shape(), (Shape{1}));
  THD_EXPECT_THROW_MSG(Tensor::from_vector<float>({1, 2, 3}, {2, 2}), ShapeError, "do not fill");
}

TEST(Creation, StorageBoundsAreChecked) {
  auto storage = std::make_shared<StorageImpl>(16, Device::cpu());
  EXPECT_NO_THROW(Tensor(storage, kFloat32, {2, 2}, {2, 1}, 0));
  THD_EXPECT_THROW_MSG(Tensor(storage, kFloat32, {2, 2}, {2, 1}, 1), ValueError, "storage holds 4");
  THD_EXPECT_THROW_MSG(Tensor(storage, kFloat32, {3}, {2}, 0), ValueError, "reaches element 4");
}

TEST(Creation, PrintsLikeTorch) {
  EXPECT_EQ(Tensor::arange(4).view({2, 2}).str(), "tensor([[0, 1],\n        [2, 3]], dtype=int64)");
  EXPECT_EQ(Tensor::full({2}, 1.5).str(), "tensor([1.5, 1.5], dtype=float32)");
  EXPECT_EQ(Tensor::ones({1}, kBool).str(), "tensor([True], dtype=bool)");
  EXPECT_EQ(Tensor::zeros({0, 2}).str(), "tensor([], size=[0, 2], dtype=float32)");
  std::string big = Tensor::arange(5000).str();
  EXPECT_NE(big.find("..."), std::string::npos);
  EXPECT_EQ(Tensor().str(), "tensor(undefined)");
}

// A loop's small result takes the block its previous result freed; the kept block
// counts as cached, not allocated, so a memory limit on allocated_bytes sees exactly
// the live tensors.
TEST(Memory, SmallStoragesReuseFreedBlocks) {
  empty_cache();
  const Shape shape{333};  // a size class no other test's tensors are likely to share
  const MemoryStats s0 = memory_stats();
  void* first = nullptr;
  int64_t held = 0;
  {
    Tensor a = Tensor::empty(shape);
    first = a.data_ptr();
    held = memory_stats().allocated_bytes - s0.allocated_bytes;
    EXPECT_GE(held, 333 * 4);
  }
  const MemoryStats s1 = memory_stats();
  EXPECT_EQ(s1.allocated_bytes, s0.allocated_bytes);
  EXPECT_GT(s1.cached_bytes, s0.cached_bytes);
  for (int i = 0; i < 10; ++i) {
    Tensor b = Tensor::empty(shape);
    EXPECT_EQ(b.data_ptr(), first);
    EXPECT_EQ(memory_stats().allocated_bytes - s0.allocated_bytes, held);
  }
  const MemoryStats s2 = memory_stats();
  EXPECT_EQ(s2.num_cache_hits, s1.num_cache_hits + 10);
  EXPECT_EQ(s2.num_allocs, s1.num_allocs + 10);
  EXPECT_EQ(s2.allocated_bytes, s0.allocated_bytes);
  // Several freed at once are kept too, up to a few of a class; the rest go back to the heap.
  {
    std::vector<Tensor> many;
    for (int i = 0; i < 16; ++i) many.push_back(Tensor::full(shape, i));
    EXPECT_EQ(memory_stats().allocated_bytes - s0.allocated_bytes, 16 * held);
    EXPECT_EQ(many[15].to_vector<float>()[332], 15.0f);
  }
  EXPECT_EQ(memory_stats().allocated_bytes, s0.allocated_bytes);
  empty_cache();
  EXPECT_EQ(memory_stats().cached_bytes, 0);
  EXPECT_EQ(memory_stats().allocated_bytes, s0.allocated_bytes);
}

TEST(Memory, CachingAllocatorReusesLargeBlocks) {
  const int64_t n = 4 << 20;  // 16 MiB of float32
  MemoryStats s0 = memory_stats();
  void* first;
  {
    Tensor a = Tensor::empty({n});
    first = a.data_ptr();
    EXPECT_GE(memory_stats().allocated_bytes - s0.allocated_bytes, n * 4);
  }
  MemoryStats s1 = memory_stats();
  EXPECT_EQ(s1.allocated_bytes, s0.allocated_bytes);
  EXPECT_GE(s1.cached_bytes, n * 4);
  Tensor b = Tensor::empty({n});
  EXPECT_EQ(b.data_ptr(), first);
  EXPECT_EQ(memory_stats().num_cache_hits, s1.num_cache_hits + 1);
  b = Tensor();
  empty_cache();
  EXPECT_EQ(memory_stats().cached_bytes, 0);
  EXPECT_GE(memory_stats().peak_allocated_bytes, n * 4);
}

}  // namespace
}  // namespace thd
