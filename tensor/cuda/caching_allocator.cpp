#include "tensor/cuda/caching_allocator.h"

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include <thd/cuda.h>

#include "tensor/check.h"
#include "tensor/cuda/allocation_counters.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/cuda_stream.h"
#include "tensor/cuda/event_pool.h"

namespace thd::cuda {
namespace detail {
namespace {

constexpr size_t kMinBlock = 512;                  // every size rounds up to this
constexpr size_t kSmallSize = size_t{1} << 20;     // largest request of the small pool
constexpr size_t kSmallSegment = size_t{2} << 20;  // segments the small pool carves
constexpr size_t kLargeSegment = size_t{20} << 20; // ... and the large pool below:
constexpr size_t kMinLargeAlloc = size_t{10} << 20;
constexpr size_t kRoundLarge = size_t{2} << 20;    // larger segments round to this

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t block_size(size_t nbytes) {
  return nbytes < kMinBlock ? kMinBlock : round_up(nbytes, kMinBlock);
}

size_t segment_size(size_t size) {
  if (size <= kSmallSize) return kSmallSegment;
  if (size < kMinLargeAlloc) return kLargeSegment;
  return round_up(size, kRoundLarge);
}

// A piece of a segment (one cudaMalloc). The pieces of a segment form a list in
// address order; all of them belong to the stream the segment was made for.
struct Block {
  Block(cudaStream_t stream_in, size_t size_in, char* ptr_in, bool small_in)
      : stream(stream_in), size(size_in), ptr(ptr_in), small(small_in) {}

  cudaStream_t stream;
  size_t size;
  char* ptr;
  bool small;              // which pool it returns to
  bool allocated = false;  // held by a storage
  // Events recorded at free time on the streams in stream_uses that have not
  // completed yet; the block returns to its pool when this drops to 0.
  int pending_events = 0;
  std::vector<cudaStream_t> stream_uses;  // other streams that used it (record_stream)
  Block* prev = nullptr;
  Block* next = nullptr;
};

// Pools are ordered by stream, then size: lower_bound finds the best fit on a stream.
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) {
      return reinterpret_cast<uintptr_t>(a->stream) < reinterpret_cast<uintptr_t>(b->stream);
    }
    if (a->size != b->size) return a->size < b->size;
    return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
  }
};
using Pool = std::set<Block*, BlockOrder>;

struct PendingFree {
  cudaEvent_t event;
  Block* block;
};

// Switches to a device and back without throwing, for the free path (a storage's
// deleter), which must not fail.
class QuietDeviceGuard {
 public:
  explicit QuietDeviceGuard(int device) noexcept {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != device) {
      switched_ = cudaSetDevice(device) == cudaSuccess;
    }
  }
  ~QuietDeviceGuard() {
    if (switched_) (void)cudaSetDevice(previous_);
  }
  QuietDeviceGuard(const QuietDeviceGuard&) = delete;
  QuietDeviceGuard& operator=(const QuietDeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

std::string human_bytes(int64_t n) {
  constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(n);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(kUnits)) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} bytes", n) : fmt::format("{:.2f} {}", v, kUnits[u]);
}

class DeviceAllocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}

  void* allocate(size_t nbytes, cudaStream_t stream) {
    // A size this large can never be had; refuse before rounding overflows.
    const size_t size = nbytes > (SIZE_MAX >> 2) ? (SIZE_MAX >> 2) : block_size(nbytes);
    std::lock_guard lock(mu_);
    process_events();
    Pool& pool = size <= kSmallSize ? small_ : large_;
    Block* b = take_free(pool, stream, size);
    const bool hit = b != nullptr;
    if (b == nullptr) b = new_segment(stream, size);
    if (should_split(b, size)) {
      auto* rest = new Block(stream, b->size - size, b->ptr + size, b->small);
      rest->prev = b;
      rest->next = b->next;
      if (b->next != nullptr) b->next->prev = rest;
      b->next = rest;
      b->size = size;
      pool.insert(rest);
    }
    b->allocated = true;
    live_.emplace(b->ptr, b);
    counters_.handed_out(b->size, hit);
    return b->ptr;
  }

  void deallocate(void* ptr) noexcept {
    std::lock_guard lock(mu_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return;  // not from this allocator; nothing to give back
    Block* b = it->second;
    live_.erase(it);
    b->allocated = false;
    counters_.given_back(b->size);
    if (!b->stream_uses.empty()) mark_stream_uses(b);
    if (b->pending_events == 0) free_block(b);
  }

  void record_stream(void* ptr, cudaStream_t stream) {
    std::lock_guard lock(mu_);
    auto it = live_.find(ptr);
    THD_CHECK(it != live_.end(), ValueError, "record_stream",
              "the storage at {} on cuda:{} was not allocated by thd's caching allocator", ptr,
              device_);
    Block* b = it->second;
    if (stream == b->stream) return;
    for (cudaStream_t s : b->stream_uses) {
      if (s == stream) return;
    }
    b->stream_uses.push_back(stream);
  }

  MemoryStats stats() {
    std::lock_guard lock(mu_);
    return counters_.stats();
  }

  void reset_peak() {
    std::lock_guard lock(mu_);
    counters_.reset_peak();
  }

  void empty_cache() {
    std::lock_guard lock(mu_);
    release_cached("empty_cache");
  }

 private:
  static bool should_split(const Block* b, size_t size) {
    const size_t rest = b->size - size;
    // A small remainder of a large block would be a sliver nothing large fits in.
    return b->small ? rest >= kMinBlock : rest > kSmallSize;
  }

  static Block* take_free(Pool& pool, cudaStream_t stream, size_t size) {
    Block key(stream, size, nullptr, false);
    auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) return nullptr;
    Block* b = *it;
    pool.erase(it);
    return b;
  }

  Block* new_segment(cudaStream_t stream, size_t size) {
    const size_t bytes = segment_size(size);
    DeviceGuard guard(device_);
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
      // What the cache holds may be what stands between us and the request.
      (void)cudaGetLastError();
      release_cached("allocate");
      err = cudaMalloc(&p, bytes);
    }
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      throw_out_of_memory(size);
    }
    if (err != cudaSuccess) {
      cuda::detail::throw_cuda_error(err, "cudaMalloc", "allocate", __FILE__, __LINE__);
    }
    counters_.reserved(bytes);
    return new Block(stream, bytes, static_cast<char*>(p), size <= kSmallSize);
  }

  [[noreturn]] void throw_out_of_memory(size_t size) {
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) (void)cudaGetLastError();
    THD_THROW(OutOfMemoryError, "allocate",
              "CUDA out of memory: tried to allocate {} on cuda:{}; the device has {} free of {}; "
              "thd holds {} in tensors and {} cached ({} cudaMalloc calls so far)",
              human_bytes(static_cast<int64_t>(size)), device_,
              human_bytes(static_cast<int64_t>(free_bytes)),
              human_bytes(static_cast<int64_t>(total_bytes)), human_bytes(counters_.allocated_bytes),
              human_bytes(counters_.cached_bytes()), counters_.num_cuda_allocs);
  }

  // Records an event on every other stream that used b, so b waits for them.
  void mark_stream_uses(Block* b) noexcept {
    QuietDeviceGuard guard(device_);
    for (cudaStream_t use : b->stream_uses) {
      cudaEvent_t e = nullptr;
      try {
        e = EventPool::instance().acquire(device_);
      } catch (...) {
        e = nullptr;
      }
      if (e != nullptr && cudaEventRecord(e, use) == cudaSuccess) {
        pending_.push_back({e, b});
        ++b->pending_events;
        continue;
      }
      // No event to mark the stream's position with: wait for the stream instead. (If
      // the driver is shutting down this fails too, and nothing runs any more.)
      (void)cudaGetLastError();
      if (e != nullptr) EventPool::instance().release(device_, e);
      (void)cudaStreamSynchronize(use);
      (void)cudaGetLastError();
    }
    b->stream_uses.clear();
  }

  // Returns the blocks whose cross-stream uses have completed to their pools.
  void process_events() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      const cudaError_t err = cudaEventQuery(it->event);
      if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();
        ++it;
        continue;
      }
      if (err != cudaSuccess) {
        cuda::detail::throw_cuda_error(err, "cudaEventQuery", "allocate", __FILE__, __LINE__);
      }
      Block* b = it->block;
      EventPool::instance().release(device_, it->event);
      it = pending_.erase(it);
      if (--b->pending_events == 0) free_block(b);
    }
  }

  // b (free, no pending events) merges with its free neighbours and joins its pool.
  void free_block(Block* b) {
    Pool& pool = b->small ? small_ : large_;
    merge(b, b->prev, pool);
    merge(b, b->next, pool);
    pool.insert(b);
  }

  static void merge(Block* dst, Block* src, Pool& pool) {
    if (src == nullptr || src->allocated || src->pending_events > 0) return;
    pool.erase(src);
    if (dst->prev == src) {
      dst->ptr = src->ptr;
      dst->prev = src->prev;
      if (dst->prev != nullptr) dst->prev->next = dst;
    } else {
      dst->next = src->next;
      if (dst->next != nullptr) dst->next->prev = dst;
    }
    dst->size += src->size;
    delete src;
  }

  // cudaFree of every whole free segment, once all work on the device is done.
  void release_cached(const char* op) {
    DeviceGuard guard(device_);
    THD_CUDA_CHECK(cudaDeviceSynchronize(), op);
    // Every event is complete after the synchronize.
    while (!pending_.empty()) {
      PendingFree p = pending_.front();
      pending_.pop_front();
      EventPool::instance().release(device_, p.event);
      if (--p.block->pending_events == 0) free_block(p.block);
    }
    release_segments(small_, op);
    release_segments(large_, op);
  }

  void release_segments(Pool& pool, const char* op) {
    for (auto it = pool.begin(); it != pool.end();) {
      Block* b = *it;
      if (b->prev != nullptr || b->next != nullptr) {  // part of a segment still in use
        ++it;
        continue;
      }
      THD_CUDA_CHECK(cudaFree(b->ptr), op);
      counters_.released(b->size);
      it = pool.erase(it);
      delete b;
    }
  }

  const int device_;
  std::mutex mu_;  // guards everything below
  Pool small_;
  Pool large_;
  std::unordered_map<void*, Block*> live_;  // allocated blocks by address
  std::list<PendingFree> pending_;
  AllocationCounters counters_;  // reserved: in segments
};

DeviceAllocator& device_allocator(int device, const char* op) {
  // Never destroyed: storages freed by static destructors at exit still find it.
  static auto* allocators = [] {
    auto* v = new std::vector<std::unique_ptr<DeviceAllocator>>();
    for (int d = 0; d < device_count(); ++d) v->push_back(std::make_unique<DeviceAllocator>(d));
    return v;
  }();
  const int n = static_cast<int>(allocators->size());
  THD_CHECK(device >= 0 && device < n, ValueError, op,
            "device cuda:{} is out of range ({} CUDA devices)", device, n);
  return *(*allocators)[static_cast<size_t>(device)];
}

}  // namespace

CachingAllocator& CachingAllocator::instance() {
  static auto* a = new CachingAllocator();
  return *a;
}

void* CachingAllocator::allocate(size_t nbytes, int device, cudaStream_t stream) {
  return device_allocator(device, "allocate").allocate(nbytes, stream);
}

void CachingAllocator::deallocate(void* ptr, int device) noexcept {
  // The device was checked when the block was allocated.
  try {
    device_allocator(device, "free").deallocate(ptr);
  } catch (...) {
  }
}

void CachingAllocator::record_stream(void* ptr, int device, cudaStream_t stream) {
  device_allocator(device, "record_stream").record_stream(ptr, stream);
}

MemoryStats CachingAllocator::stats(int device) {
  return device_allocator(device, "memory_stats").stats();
}

void CachingAllocator::reset_peak(int device) {
  device_allocator(device, "reset_peak_memory_stats").reset_peak();
}

void CachingAllocator::empty_cache(int device) {
  device_allocator(device, "empty_cache").empty_cache();
}

}  // namespace detail

void record_stream(const Storage& storage, cudaStream_t stream) {
  THD_CHECK(storage != nullptr && storage->device().is_cuda(), ValueError, "record_stream",
            "expects a CUDA storage, got {}", storage ? storage->device().str() : "none");
  THD_CHECK(!storage->is_meta(), NotImplementedError, "record_stream",
            "the storage is on the meta device: it holds no memory for a stream to use");
  detail::CachingAllocator::instance().record_stream(storage->data(), storage->device().index(),
                                                     stream);
}

}  // namespace thd::cuda
