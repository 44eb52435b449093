// The host allocator behind every CPU tensor.
//
// Large blocks (>= kLargeBlock) come from mmap, 2 MiB aligned with transparent huge
// pages requested, and are cached when freed: a loop that makes a same-sized result
// each iteration reuses warm pages instead of page-faulting fresh ones (a fresh
// 64 MiB output costs more in faults than the add that fills it). The cache is
// bounded (THD_CPU_CACHE_BYTES, default 1 GiB); small blocks go to malloc. The
// counters of small blocks are atomics, so the many small allocations of small ops
// take no lock.
#pragma once

#include <cstddef>
#include <cstdint>

#include <thd/memory.h>

namespace thd::detail {

class CpuAllocator {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kLargeBlock = size_t{1} << 20;

  // Returns nullptr when the system is out of memory. `size` is recorded in the
  // returned block's bookkeeping through `allocated`: pass it back to deallocate.
  void* allocate(size_t nbytes, size_t* allocated);
  void deallocate(void* p, size_t allocated);

  // The bookkeeping alone, for small data (nbytes < kLargeBlock) whose memory the
  // caller gets from the heap itself (allocate_storage() puts a small storage's data
  // in the heap block of its control block): counted as allocate() would count it.
  void count_small(size_t nbytes);
  void uncount_small(size_t nbytes);

  MemoryStats stats() const;
  // stats().allocated_bytes without the cache's lock (an op's memory-limit check).
  int64_t allocated_bytes() const;
  void reset_peak();
  void empty_cache();

  static CpuAllocator& instance();
};

}  // namespace thd::detail
