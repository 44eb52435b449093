// Page-locked (pinned) host memory for copies between host and device.
//
// DMA to or from a device needs pinned memory; cudaHostAlloc is slow (it maps and
// locks pages), so blocks are cached and reused, like torch's CachingHostAllocator.
// A block may be in use by copies still queued on some stream after its owner let
// go of it: every such use is marked with an event, and the block is handed out
// again only once all of them completed. Sizes round up to a power of two (at least
// 4 KiB) so that blocks are reused across slightly different requests. The cache is
// never destroyed (at process exit the CUDA driver may already be gone).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include <thd/memory.h>

namespace thd::cuda {

namespace detail {
// Work queued on a stream of `device` up to `event` uses a pinned block.
struct PinnedUse {
  int device;
  cudaEvent_t event;
};
}  // namespace detail

// A pinned host block held for the lifetime of this object (move-only). Usable by
// copies on any device (cudaHostAllocPortable).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  // At least nbytes from the cache, or from cudaHostAlloc when no cached block fits.
  // Throws OutOfMemoryError when the host has no pinned memory to give.
  explicit PinnedBuffer(size_t nbytes);
  // Gives the block back; it is reused once every use recorded on it completed.
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }

  // Marks the work queued so far on `stream` (of `device`) as a use of this block:
  // it is not reused, and wait_uses() does not return, before that work completes.
  void record_use(cudaStream_t stream, int device);
  // Blocks until every recorded use completed (the host may then read what a copy
  // wrote, or overwrite what a copy read), and forgets them.
  void wait_uses();

 private:
  void reset() noexcept;

  void* data_ = nullptr;
  size_t size_ = 0;
  std::vector<detail::PinnedUse> uses_;
};

namespace detail {

// The pinned cache's counters: bytes held by PinnedBuffers, bytes cached, and
// cudaHostAlloc calls (num_device_allocs).
MemoryStats pinned_memory_stats();
// cudaFreeHost of every cached block no copy uses any more.
void empty_pinned_cache();

}  // namespace detail
}  // namespace thd::cuda
