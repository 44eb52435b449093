// The counters behind thd::MemoryStats that both CUDA caching allocators (device
// blocks, pinned host blocks) keep, each under its own lock.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <thd/memory.h>

namespace thd::cuda::detail {

struct AllocationCounters {
  int64_t allocated_bytes = 0;  // handed out now
  int64_t peak_allocated_bytes = 0;
  int64_t reserved_bytes = 0;  // taken from CUDA (cudaMalloc, cudaHostAlloc): handed out or cached
  int64_t num_allocs = 0;
  int64_t num_cache_hits = 0;
  int64_t num_cuda_allocs = 0;  // cudaMalloc / cudaHostAlloc calls

  void handed_out(size_t bytes, bool cache_hit) {
    ++num_allocs;
    if (cache_hit) ++num_cache_hits;
    allocated_bytes += static_cast<int64_t>(bytes);
    peak_allocated_bytes = std::max(peak_allocated_bytes, allocated_bytes);
  }
  void given_back(size_t bytes) { allocated_bytes -= static_cast<int64_t>(bytes); }
  void reserved(size_t bytes) {
    reserved_bytes += static_cast<int64_t>(bytes);
    ++num_cuda_allocs;
  }
  void released(size_t bytes) { reserved_bytes -= static_cast<int64_t>(bytes); }
  int64_t cached_bytes() const { return reserved_bytes - allocated_bytes; }

  MemoryStats stats() const {
    MemoryStats m;
    m.allocated_bytes = allocated_bytes;
    m.peak_allocated_bytes = peak_allocated_bytes;
    m.cached_bytes = cached_bytes();
    m.num_allocs = num_allocs;
    m.num_cache_hits = num_cache_hits;
    m.num_device_allocs = num_cuda_allocs;
    return m;
  }
  void reset_peak() { peak_allocated_bytes = allocated_bytes; }
};

}  // namespace thd::cuda::detail
