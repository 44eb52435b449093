// Memory accounting of this process's tensor allocator.
#pragma once

#include <cstdint>

#include <thd/device.h>

namespace thd {

struct MemoryStats {
  int64_t allocated_bytes = 0;       // held by live tensors now
  int64_t peak_allocated_bytes = 0;  // the most held at once since start or reset
  int64_t cached_bytes = 0;          // freed by tensors, kept for reuse
  int64_t num_allocs = 0;            // allocations served
  int64_t num_cache_hits = 0;        // ... of them from the cache
  // Memory obtained from the device itself (cudaMalloc calls of a CUDA device's
  // caching allocator): unchanged once a steady loop's blocks are all cached. 0 for
  // the CPU.
  int64_t num_device_allocs = 0;
};

// The counters of device's allocator (the CUDA caching allocator of that device for
// Device::cuda(i)). A CUDA device out of range is a ValueError; any CUDA device in a
// build without CUDA a NotImplementedError.
MemoryStats memory_stats(Device device = Device::cpu());
// Makes the peak equal to what is allocated now.
void reset_peak_memory_stats(Device device = Device::cpu());
// Returns every cached block to the operating system (on a CUDA device: cudaFree of
// every cached segment no tensor uses a part of, after the device's work finished).
void empty_cache(Device device = Device::cpu());

}  // namespace thd
