// The caching allocator behind every CUDA tensor, after PyTorch's
// CUDACachingAllocator.
//
// cudaMalloc and cudaFree are slow and synchronize the device, so freed blocks are
// kept and handed out again. Each device has its own pools (and mutex); a block
// belongs to the stream it was allocated on, and a freed block is reused at once by
// later allocations on that stream only: work on one stream runs in issue order, so
// anything that still reads the block on that stream runs before the new owner's
// work does. A block that was also used on other streams (record_stream) returns to
// its pool only once an event recorded on each of those streams at free time has
// completed.
//
// Sizes round up to multiples of 512 bytes. Requests up to 1 MiB (the small pool)
// are carved from 2 MiB segments; larger ones from 20 MiB segments (below 10 MiB)
// or segments of their own size rounded up to 2 MiB. A block larger than the
// request is split and the remainder stays in the pool; freed neighbours of one
// segment merge again. When cudaMalloc fails, the device's cached segments are
// freed (after a device synchronize) and the allocation retried once before
// OutOfMemoryError. The allocator is never destroyed: at process exit the CUDA
// driver may already be gone, and its memory goes with the process.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include <thd/memory.h>
#include <thd/storage.h>

namespace thd::cuda {

// Marks `storage` (a CUDA storage) as used by work queued on `stream` (of the same
// device): when the storage is freed, its memory is reused only after that work
// completes (torch's Tensor.record_stream). Not needed for the stream the storage
// was allocated on. Does not block.
void record_stream(const Storage& storage, cudaStream_t stream);

namespace detail {

class CachingAllocator {
 public:
  static CachingAllocator& instance();

  // At least nbytes (rounded up, 512-byte aligned) on `device`, for use in order on
  // `stream`. Throws OutOfMemoryError naming the size, the device and the
  // allocator's counters when the device has no room even after the cache is freed.
  void* allocate(size_t nbytes, int device, cudaStream_t stream);
  // Returns a block from allocate(); never throws (a storage's deleter calls it).
  void deallocate(void* ptr, int device) noexcept;
  void record_stream(void* ptr, int device, cudaStream_t stream);

  MemoryStats stats(int device);
  void reset_peak(int device);
  // cudaFree of every cached segment of `device` no tensor uses any part of.
  void empty_cache(int device);

 private:
  CachingAllocator() = default;
};

}  // namespace detail
}  // namespace thd::cuda
