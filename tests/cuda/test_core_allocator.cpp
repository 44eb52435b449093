// The CUDA caching allocator and the pinned host cache: counters, reuse without
// cudaMalloc, stream ownership of blocks, record_stream, empty_cache, running out
// of memory.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <thd/cuda.h>
#include <thd/memory.h>
#include <thd/tensor.h>

#include "cuda_test_util.h"
#include "tensor/cuda/caching_allocator.h"
#include "tensor/cuda/cuda_stream.h"
#include "tensor/cuda/pinned_allocator.h"

namespace thd {
namespace {

using testing::OwnedStream;

const Device kDev = Device::cuda(0);

Tensor bytes_on_device(int64_t n) { return Tensor::empty({n}, kUInt8, kDev); }

// Holds a stream at a host function until release() (or 20 s, so a failing test
// cannot hang): work queued behind it stays incomplete meanwhile.
class StreamBlocker {
 public:
  explicit StreamBlocker(cudaStream_t s) : stream_(s) {
    EXPECT_EQ(cudaLaunchHostFunc(s, &StreamBlocker::hold, this), cudaSuccess);
  }
  ~StreamBlocker() {
    release();
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  }
  void release() { released_ = true; }

 private:
  static void CUDART_CB hold(void* self) {
    auto* b = static_cast<StreamBlocker*>(self);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!b->released_ && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  cudaStream_t stream_;
  std::atomic<bool> released_{false};
};

TEST(CudaAllocator, CountsAllocationsAndFrees) {
  THD_REQUIRE_CUDA();
  const MemoryStats before = memory_stats(kDev);
  {
    const Tensor t = Tensor::empty({1000}, kFloat32, kDev);  // 4000 bytes -> 4096
    const MemoryStats during = memory_stats(kDev);
    EXPECT_EQ(during.allocated_bytes - before.allocated_bytes, 4096);
    EXPECT_EQ(during.num_allocs - before.num_allocs, 1);
    EXPECT_GE(during.peak_allocated_bytes, during.allocated_bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 512, 0u);
  }
  const MemoryStats after = memory_stats(kDev);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_GE(after.cached_bytes, 4096);
  // The CPU's counters are separate.
  EXPECT_EQ(memory_stats(Device::cpu()).num_device_allocs, 0);
}

TEST(CudaAllocator, EmptyTensorsHaveStorage) {
  THD_REQUIRE_CUDA();
  const Tensor t = Tensor::empty({0, 3}, kFloat64, kDev);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_NE(t.data_ptr(), nullptr);
  EXPECT_EQ(t.cpu().numel(), 0);
}

// A freed block is handed out again at once to the next request of its size on its
// stream, and to no other stream.
TEST(CudaAllocator, BlocksBelongToTheirStream) {
  THD_REQUIRE_CUDA();
  void* first = nullptr;
  {
    const Tensor t = bytes_on_device(3 << 20);
    first = t.data_ptr();
  }
  {
    const Tensor again = bytes_on_device(3 << 20);
    EXPECT_EQ(again.data_ptr(), first);
  }
  OwnedStream other;
  {
    cuda::StreamGuard guard(0, other.get());
    const Tensor elsewhere = bytes_on_device(3 << 20);
    EXPECT_NE(elsewhere.data_ptr(), first);
  }
  // And the other way round, with a size no block cached for this stream fits.
  empty_cache(kDev);
  constexpr int64_t kLarge = int64_t{300} << 20;
  void* side = nullptr;
  {
    cuda::StreamGuard guard(0, other.get());
    side = bytes_on_device(kLarge).data_ptr();
  }
  const Tensor here = bytes_on_device(kLarge);
  EXPECT_NE(here.data_ptr(), side);
}

TEST(CudaAllocator, NoCudaMallocAfterWarmUp) {
  THD_REQUIRE_CUDA();
  const std::vector<int64_t> sizes = {1,       511,           512,      1000,     4096,
                                      1 << 20, (1 << 20) + 1, 3 << 20,  12 << 20,
                                      (int64_t{33} << 20) + 7,  100,    777777};
  auto round = [&] {
    std::vector<Tensor> live;
    for (int64_t n : sizes) live.push_back(bytes_on_device(n));
    // Free in an order different from allocation, keeping every other one a while.
    for (size_t i = 0; i < live.size(); i += 2) live[i] = Tensor();
    for (int64_t n : {int64_t{4096}, int64_t{1} << 20}) live.push_back(bytes_on_device(n));
  };
  round();
  const MemoryStats warm = memory_stats(kDev);
  for (int i = 0; i < 50; ++i) round();
  const MemoryStats after = memory_stats(kDev);
  EXPECT_EQ(after.num_device_allocs, warm.num_device_allocs);
  const int64_t per_round = static_cast<int64_t>(sizes.size()) + 2;
  EXPECT_EQ(after.num_allocs - warm.num_allocs, 50 * per_round);
  EXPECT_EQ(after.num_cache_hits - warm.num_cache_hits, 50 * per_round);
  EXPECT_EQ(after.allocated_bytes, warm.allocated_bytes);
}

// Small requests share 2 MiB segments.
TEST(CudaAllocator, SmallBlocksShareSegments) {
  THD_REQUIRE_CUDA();
  std::vector<Tensor> live;
  live.push_back(bytes_on_device(1000));  // may open a segment
  const int64_t mallocs = memory_stats(kDev).num_device_allocs;
  // 1000 more small blocks of 1 KiB fit in one more 2 MiB segment at most.
  for (int i = 0; i < 1000; ++i) live.push_back(bytes_on_device(1024));
  EXPECT_LE(memory_stats(kDev).num_device_allocs - mallocs, 1);
  std::set<void*> distinct;
  for (const Tensor& t : live) distinct.insert(t.data_ptr());
  EXPECT_EQ(distinct.size(), live.size());
}

TEST(CudaAllocator, PeakAndReset) {
  THD_REQUIRE_CUDA();
  reset_peak_memory_stats(kDev);
  const int64_t base = memory_stats(kDev).allocated_bytes;
  EXPECT_EQ(memory_stats(kDev).peak_allocated_bytes, base);
  { const Tensor t = bytes_on_device(8 << 20); }
  EXPECT_EQ(memory_stats(kDev).peak_allocated_bytes, base + (8 << 20));
  EXPECT_EQ(memory_stats(kDev).allocated_bytes, base);
  reset_peak_memory_stats(kDev);
  EXPECT_EQ(memory_stats(kDev).peak_allocated_bytes, base);
}

TEST(CudaAllocator, EmptyCacheReturnsCachedSegments) {
  THD_REQUIRE_CUDA();
  { const Tensor t = bytes_on_device(int64_t{64} << 20); }  // a segment of its own
  const MemoryStats cached = memory_stats(kDev);
  EXPECT_GE(cached.cached_bytes, int64_t{64} << 20);
  size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  empty_cache(kDev);
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  const MemoryStats emptied = memory_stats(kDev);
  EXPECT_LE(emptied.cached_bytes, cached.cached_bytes - (int64_t{64} << 20));
  EXPECT_GE(free_after, free_before + (size_t{64} << 20));
  if (emptied.allocated_bytes == 0) {
    EXPECT_EQ(emptied.cached_bytes, 0);
  }
  // Allocating again needs the device again.
  const Tensor t = bytes_on_device(int64_t{64} << 20);
  EXPECT_GT(memory_stats(kDev).num_device_allocs, emptied.num_device_allocs);
}

TEST(CudaAllocator, OutOfMemoryThrowsAndLeavesTheAllocatorUsable) {
  THD_REQUIRE_CUDA();
  const Tensor keep = Tensor::ones({1000}, kFloat32, kDev);
  try {
    bytes_on_device(int64_t{1} << 50);  // 1 PiB
    ADD_FAILURE() << "1 PiB was allocated";
  } catch (const OutOfMemoryError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("1.00 PiB"), std::string::npos) << what;
    EXPECT_NE(what.find("cuda:0"), std::string::npos) << what;
    EXPECT_NE(what.find("cached"), std::string::npos) << what;
  }
  EXPECT_THROW(bytes_on_device(int64_t{1} << 50), CudaError);  // OutOfMemoryError is one
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // no error left behind
  const Tensor fresh = Tensor::full({1000}, 2, kFloat32, kDev);
  EXPECT_EQ(fresh.cpu().sum().item<double>(), 2000.0);
  EXPECT_EQ(keep.cpu().sum().item<double>(), 1000.0);
}

// A block used on a second stream (record_stream) is not reused before the work
// queued there at free time completed.
TEST(CudaAllocator, RecordStreamDelaysReuse) {
  THD_REQUIRE_CUDA();
  empty_cache(kDev);  // so that no other cached block fits the size below
  constexpr int64_t kSize = int64_t{200} << 20;  // a whole segment, not split
  OwnedStream side;
  void* first = nullptr;
  Tensor meanwhile;
  {
    StreamBlocker blocker(side.get());
    {
      const Tensor t = bytes_on_device(kSize);
      first = t.data_ptr();
      cuda::record_stream(t.storage(), side.get());
      cuda::record_stream(t.storage(), side.get());  // twice is once
    }
    // The side stream has not reached the point where t was freed.
    meanwhile = bytes_on_device(kSize);
    EXPECT_NE(meanwhile.data_ptr(), first);
    blocker.release();
  }  // the blocker's destructor synchronizes the side stream
  const Tensor later = bytes_on_device(kSize);
  EXPECT_EQ(later.data_ptr(), first);
}

TEST(CudaAllocator, RecordStreamErrors) {
  THD_REQUIRE_CUDA();
  EXPECT_THROW(cuda::record_stream(Tensor::ones({2}).storage(), nullptr), ValueError);
  EXPECT_THROW(cuda::record_stream(nullptr, nullptr), ValueError);
}

TEST(CudaAllocator, ThreadsAllocateConcurrently) {
  THD_REQUIRE_CUDA();
  const int64_t before = memory_stats(kDev).allocated_bytes;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < 200; ++i) {
          Tensor a = bytes_on_device(1000 + 37 * i + t);
          Tensor b = bytes_on_device((i % 5 + 1) << 20);
          if (a.data_ptr() == b.data_ptr()) ++failures;
        }
      } catch (...) {
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(memory_stats(kDev).allocated_bytes, before);
}

// Pinned blocks are handed out again only once the copies using them completed.
TEST(CudaPinned, BlocksWaitForTheirCopies) {
  THD_REQUIRE_CUDA();
  OwnedStream side;
  const size_t size = (size_t{16} << 20) + 1;  // the 32 MiB class, unused elsewhere
  const Tensor dev = bytes_on_device(1 << 20);
  void* first = nullptr;
  cuda::PinnedBuffer meanwhile;
  {
    StreamBlocker blocker(side.get());
    cuda::PinnedBuffer a(size);
    first = a.data();
    EXPECT_GE(a.size(), size);
    ASSERT_EQ(cudaMemcpyAsync(a.data(), dev.data_ptr(), 1 << 20, cudaMemcpyDeviceToHost, side.get()),
              cudaSuccess);
    a.record_use(side.get(), 0);
    a = cuda::PinnedBuffer();  // given back with its copy still queued
    meanwhile = cuda::PinnedBuffer(size);
    EXPECT_NE(meanwhile.data(), first);
    blocker.release();
  }
  cuda::PinnedBuffer c(size);
  EXPECT_EQ(c.data(), first);
  c.record_use(side.get(), 0);
  c.wait_uses();  // returns: nothing holds the side stream now
  const MemoryStats pinned = cuda::detail::pinned_memory_stats();
  EXPECT_GE(pinned.allocated_bytes, 2 * static_cast<int64_t>(size));
  EXPECT_GE(pinned.num_device_allocs, 2);
}

}  // namespace
}  // namespace thd
