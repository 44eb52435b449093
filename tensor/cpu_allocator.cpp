#include "tensor/cpu_allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

#include "tensor/env_setting.h"

namespace thd::detail {

size_t cpu_cache_limit(const std::optional<std::string>& value) {
  return parse_whole_number({.name = "THD_CPU_CACHE_BYTES", .unit = "bytes"}, value, "CPU allocator")
      .value_or(CpuAllocator::kDefaultCacheBytes);
}

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

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
  // Counters every allocation updates.
  std::atomic<int64_t> allocated_bytes{0};
  std::atomic<int64_t> peak_allocated_bytes{0};
  std::atomic<int64_t> num_allocs{0};

  // The cache of large blocks.
  std::mutex mu;
  std::multimap<size_t, void*> cached;  // block size -> block
  size_t cached_bytes = 0;              // guarded by mu, as the fields below
  int64_t num_cache_hits = 0;
  // Read by the first call that needs the state, never by a deallocate (which follows an
  // allocate): a bad value fails that call, and every later one, with a ValueError.
  size_t limit = cpu_cache_limit(env_value("THD_CPU_CACHE_BYTES"));

  // The kept blocks of small storages: kSmallSlots per size class of 64 bytes.
  static constexpr size_t kSmallClasses = CpuAllocator::kSmallCacheBytes / 64;
  static constexpr size_t kSmallSlots = 4;
  std::array<std::array<std::atomic<void*>, kSmallSlots>, kSmallClasses> small{};
  std::atomic<int64_t> small_cached_bytes{0};
  std::atomic<int64_t> small_cache_hits{0};

  void add_allocated(size_t bytes) {
    const int64_t now =
        allocated_bytes.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed) +
        static_cast<int64_t>(bytes);
    int64_t peak = peak_allocated_bytes.load(std::memory_order_relaxed);
    while (now > peak &&
           !peak_allocated_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  void sub_allocated(size_t bytes) {
    allocated_bytes.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  }

  void release_until(size_t target) {
    // Largest blocks first: they are the least likely to fit the next request.
    while (cached_bytes > target && !cached.empty()) {
      auto it = std::prev(cached.end());
      munmap(it->second, it->first);
      cached_bytes -= it->first;
      cached.erase(it);
    }
  }
};

size_t small_block_size(size_t nbytes) {
  constexpr size_t a = CpuAllocator::kAlignment;
  return std::max(a, (nbytes + a - 1) / a * a);
}

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
    const size_t size = small_block_size(nbytes);
    void* p = std::aligned_alloc(kAlignment, size);
    if (p == nullptr) return nullptr;
    *allocated = size;
    s.num_allocs.fetch_add(1, std::memory_order_relaxed);
    s.add_allocated(size);
    return p;
  }
  const size_t size = (nbytes + kHugePage - 1) / kHugePage * kHugePage;
  s.num_allocs.fetch_add(1, std::memory_order_relaxed);
  void* p = nullptr;
  {
    std::lock_guard lock(s.mu);
    // Best fit among blocks at most 25% larger, so big blocks are not wasted on small
    // requests.
    auto it = s.cached.lower_bound(size);
    if (it != s.cached.end() && it->first <= size + size / 4) {
      p = it->second;
      *allocated = it->first;
      s.cached_bytes -= it->first;
      s.cached.erase(it);
      ++s.num_cache_hits;
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
  s.add_allocated(*allocated);
  return p;
}

void CpuAllocator::deallocate(void* p, size_t allocated) {
  State& s = state();
  s.sub_allocated(allocated);
  if (allocated < kLargeBlock) {
    std::free(p);
    return;
  }
  std::lock_guard lock(s.mu);
  if (allocated > s.limit) {
    munmap(p, allocated);
    return;
  }
  s.cached.emplace(allocated, p);
  s.cached_bytes += allocated;
  s.release_until(s.limit);
}

namespace {

// The size class of a small storage's block of `bytes`: blocks of one class are
// interchangeable (each is malloc'ed at the class's full size).
size_t small_class(size_t bytes) { return (bytes + 63) / 64 - 1; }

}  // namespace

void* CpuAllocator::allocate_small(size_t bytes, size_t nbytes) {
  State& s = state();
  void* p = nullptr;
  if (bytes <= kSmallCacheBytes) {
    const size_t c = small_class(bytes);
    for (std::atomic<void*>& slot : s.small[c]) {
      if (slot.load(std::memory_order_relaxed) == nullptr) continue;
      p = slot.exchange(nullptr, std::memory_order_acquire);
      if (p != nullptr) {
        s.small_cached_bytes.fetch_sub(static_cast<int64_t>((c + 1) * 64), std::memory_order_relaxed);
        s.small_cache_hits.fetch_add(1, std::memory_order_relaxed);
        break;
      }
    }
    if (p == nullptr) p = std::malloc((c + 1) * 64);
  } else {
    p = std::malloc(bytes);
  }
  if (p == nullptr) return nullptr;
  s.num_allocs.fetch_add(1, std::memory_order_relaxed);
  s.add_allocated(small_block_size(nbytes));
  return p;
}

void CpuAllocator::deallocate_small(void* p, size_t bytes, size_t nbytes) {
  State& s = state();
  s.sub_allocated(small_block_size(nbytes));
  if (bytes <= kSmallCacheBytes) {
    const size_t c = small_class(bytes);
    for (std::atomic<void*>& slot : s.small[c]) {
      void* empty = nullptr;
      if (slot.load(std::memory_order_relaxed) == nullptr &&
          slot.compare_exchange_strong(empty, p, std::memory_order_release, std::memory_order_relaxed)) {
        s.small_cached_bytes.fetch_add(static_cast<int64_t>((c + 1) * 64), std::memory_order_relaxed);
        return;
      }
    }
  }
  std::free(p);
}

MemoryStats CpuAllocator::stats() const {
  State& s = state();
  MemoryStats m;
  m.allocated_bytes = s.allocated_bytes.load(std::memory_order_relaxed);
  m.peak_allocated_bytes = s.peak_allocated_bytes.load(std::memory_order_relaxed);
  m.num_allocs = s.num_allocs.load(std::memory_order_relaxed);
  std::lock_guard lock(s.mu);
  m.cached_bytes = static_cast<int64_t>(s.cached_bytes) + s.small_cached_bytes.load(std::memory_order_relaxed);
  m.num_cache_hits = s.num_cache_hits + s.small_cache_hits.load(std::memory_order_relaxed);
  return m;
}

int64_t CpuAllocator::allocated_bytes() const {
  return state().allocated_bytes.load(std::memory_order_relaxed);
}

void CpuAllocator::reset_peak() {
  State& s = state();
  s.peak_allocated_bytes.store(s.allocated_bytes.load(std::memory_order_relaxed),
                               std::memory_order_relaxed);
}

void CpuAllocator::empty_cache() {
  State& s = state();
  for (size_t c = 0; c < s.small.size(); ++c) {
    for (std::atomic<void*>& slot : s.small[c]) {
      if (void* p = slot.exchange(nullptr, std::memory_order_acquire)) {
        s.small_cached_bytes.fetch_sub(static_cast<int64_t>((c + 1) * 64), std::memory_order_relaxed);
        std::free(p);
      }
    }
  }
  std::lock_guard lock(s.mu);
  s.release_until(0);
}

}  // namespace thd::detail
