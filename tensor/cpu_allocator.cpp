#include "tensor/cpu_allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

namespace thd::detail {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

size_t cache_limit() {
  if (const char* env = std::getenv("THD_CPU_CACHE_BYTES")) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(env, &end, 10);
    if (end != env) return static_cast<size_t>(v);
  }
  return size_t{1} << 30;
}

// mmap'd, huge-page aligned memory of exactly `size` bytes (a multiple of 2 MiB).
void* map_block(size_t size) {
  const size_t span = size + kHugePage;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto base = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = (base + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > base) munmap(raw, aligned - base);
  uintptr_t tail = aligned + size;
  if (base + span > tail) munmap(reinterpret_cast<void*>(tail), base + span - tail);
  madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

struct State {
  std::mutex mu;
  std::multimap<size_t, void*> cached;  // block size -> block
  size_t cached_bytes = 0;
  size_t limit = cache_limit();
  MemoryStats stats;

  void release_until(size_t target) {
    // Largest blocks first: they are the least likely to fit the next request.
    while (cached_bytes > target && !cached.empty()) {
      auto it = std::prev(cached.end());
      munmap(it->second, it->first);
      cached_bytes -= it->first;
      cached.erase(it);
    }
    stats.cached_bytes = static_cast<int64_t>(cached_bytes);
  }
};

State& state() {
  static State* s = new State;  // never destroyed: tensors may outlive static destructors
  return *s;
}

}  // namespace

CpuAllocator& CpuAllocator::instance() {
  static CpuAllocator a;
  return a;
}

void* CpuAllocator::allocate(size_t nbytes, size_t* allocated) {
  State& s = state();
  if (nbytes < kLargeBlock) {
    size_t size = std::max(kAlignment, (nbytes + kAlignment - 1) / kAlignment * kAlignment);
    void* p = std::aligned_alloc(kAlignment, size);
    if (p == nullptr) return nullptr;
    *allocated = size;
    std::lock_guard lock(s.mu);
    s.stats.allocated_bytes += static_cast<int64_t>(size);
    s.stats.peak_allocated_bytes = std::max(s.stats.peak_allocated_bytes, s.stats.allocated_bytes);
    ++s.stats.num_allocs;
    return p;
  }
  const size_t size = (nbytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = nullptr;
  {
    std::lock_guard lock(s.mu);
    ++s.stats.num_allocs;
    // Best fit among blocks at most 25% larger, so big blocks are not wasted on small
    // requests.
    auto it = s.cached.lower_bound(size);
    if (it != s.cached.end() && it->first <= size + size / 4) {
      p = it->second;
      *allocated = it->first;
      s.cached_bytes -= it->first;
      s.stats.cached_bytes = static_cast<int64_t>(s.cached_bytes);
      s.cached.erase(it);
      ++s.stats.num_cache_hits;
    }
  }
  if (p == nullptr) {
    p = map_block(size);
    if (p == nullptr) {
      // Cached blocks may be what stands between us and the request.
      std::lock_guard lock(s.mu);
      s.release_until(0);
    }
    if (p == nullptr) p = map_block(size);
    if (p == nullptr) return nullptr;
    *allocated = size;
  }
  std::lock_guard lock(s.mu);
  s.stats.allocated_bytes += static_cast<int64_t>(*allocated);
  s.stats.peak_allocated_bytes = std::max(s.stats.peak_allocated_bytes, s.stats.allocated_bytes);
  return p;
}

void CpuAllocator::deallocate(void* p, size_t allocated) {
  State& s = state();
  if (allocated < kLargeBlock) {
    std::free(p);
    std::lock_guard lock(s.mu);
    s.stats.allocated_bytes -= static_cast<int64_t>(allocated);
    return;
  }
  std::lock_guard lock(s.mu);
  s.stats.allocated_bytes -= static_cast<int64_t>(allocated);
  if (allocated > s.limit) {
    munmap(p, allocated);
    return;
  }
  s.cached.emplace(allocated, p);
  s.cached_bytes += allocated;
  s.release_until(s.limit);
  s.stats.cached_bytes = static_cast<int64_t>(s.cached_bytes);
}

MemoryStats CpuAllocator::stats() const {
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.stats;
}

void CpuAllocator::reset_peak() {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.stats.peak_allocated_bytes = s.stats.allocated_bytes;
}

void CpuAllocator::empty_cache() {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.release_until(0);
}

}  // namespace thd::detail
