// The host allocator behind every CPU tensor.
//
// Large blocks (>= kLargeBlock) come from mmap, 2 MiB aligned with transparent huge
// pages requested, and are cached when freed: a loop that makes a same-sized result
// each iteration reuses warm pages instead of page-faulting fresh ones (a fresh
// 64 MiB output costs more in faults than the add that fills it). The cache is
// bounded (THD_CPU_CACHE_BYTES, default 1 GiB). Small blocks come from malloc; the
// small storages' blocks are kept too, a few per size class in slots taken and filled
// with one atomic exchange each. The counters of small blocks are atomics, so the many
// small allocations of small ops take no lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <thd/memory.h>

namespace thd::detail {

class CpuAllocator {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kLargeBlock = size_t{1} << 20;
  // The cache's bound when THD_CPU_CACHE_BYTES is unset.
  static constexpr size_t kDefaultCacheBytes = size_t{1} << 30;

  // Returns nullptr when the system is out of memory. `size` is recorded in the
  // returned block's bookkeeping through `allocated`: pass it back to deallocate.
  void* allocate(size_t nbytes, size_t* allocated);
  void deallocate(void* p, size_t allocated);

  // A heap block of at least `bytes` for a small storage (allocate_storage() puts a
  // small storage's control block, StorageImpl and data in one block), counted as
  // `nbytes` (< kLargeBlock) of tensor data, as allocate() would count it. Blocks of up
  // to kSmallCacheBytes are kept when freed, a few of each size class, and handed out
  // again: the result of a loop's small op takes the block its previous result freed,
  // without the heap. A kept block counts as cached, not allocated (one cache hit
  // when reused). nullptr when out of memory.
  void* allocate_small(size_t bytes, size_t nbytes);
  void deallocate_small(void* p, size_t bytes, size_t nbytes);
  static constexpr size_t kSmallCacheBytes = 4096;

  MemoryStats stats() const;
  // stats().allocated_bytes without the cache's lock (an op's memory-limit check).
  int64_t allocated_bytes() const;
  void reset_peak();
  void empty_cache();

  static CpuAllocator& instance();
};

// The bound of the large blocks' cache: `value` (THD_CPU_CACHE_BYTES's) in bytes,
// else kDefaultCacheBytes. ValueError naming the variable for anything but a whole
// number of bytes.
size_t cpu_cache_limit(const std::optional<std::string>& value);

}  // namespace thd::detail
