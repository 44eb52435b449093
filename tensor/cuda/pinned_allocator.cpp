#include "tensor/cuda/pinned_allocator.h"

#include <algorithm>
#include <bit>
#include <list>
#include <map>
#include <mutex>
#include <utility>

#include "tensor/check.h"
#include "tensor/cuda/allocation_counters.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/cuda_stream.h"
#include "tensor/cuda/event_pool.h"

namespace thd::cuda {
namespace detail {
namespace {

constexpr size_t kMinPinned = size_t{4} << 10;

size_t pinned_size(size_t nbytes) {
  return nbytes <= kMinPinned ? kMinPinned : std::bit_ceil(nbytes);
}

class PinnedCache {
 public:
  static PinnedCache& instance() {
    static auto* c = new PinnedCache();  // never destroyed, see pinned_allocator.h
    return *c;
  }

  void* acquire(size_t nbytes, size_t* size) {
    THD_CHECK(nbytes <= (size_t{1} << 62), OutOfMemoryError, "pin_memory",
              "cannot pin {} bytes of host memory", nbytes);
    *size = pinned_size(nbytes);
    std::lock_guard lock(mu_);
    process_pending();
    void* p = nullptr;
    auto it = free_.find(*size);
    const bool hit = it != free_.end();
    if (hit) {
      p = it->second;
      free_.erase(it);
    } else {
      p = host_alloc(*size);
    }
    counters_.handed_out(*size, hit);
    return p;
  }

  void release(void* p, size_t size, std::vector<PinnedUse> uses) noexcept {
    std::lock_guard lock(mu_);
    counters_.given_back(size);
    try {
      if (uses.empty()) {
        free_.emplace(size, p);
      } else {
        pending_.push_back({p, size, std::move(uses)});
      }
    } catch (...) {
      // Out of host memory for the bookkeeping: the block leaks (still pinned), which
      // costs less than failing a free.
    }
  }

  MemoryStats stats() {
    std::lock_guard lock(mu_);
    return counters_.stats();
  }

  void empty_cache() {
    std::lock_guard lock(mu_);
    process_pending();
    free_cached();
  }

 private:
  struct Pending {
    void* ptr;
    size_t size;
    std::vector<PinnedUse> uses;
  };

  void* host_alloc(size_t size) {
    void* p = nullptr;
    cudaError_t err = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      wait_pending();
      free_cached();
      err = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    }
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      THD_THROW(OutOfMemoryError, "pin_memory",
                "out of pinned host memory: cudaHostAlloc of {} bytes failed ({} bytes pinned "
                "by thd, {} of them in use)",
                size, counters_.reserved_bytes, counters_.allocated_bytes);
    }
    if (err != cudaSuccess) throw_cuda_error(err, "cudaHostAlloc", "pin_memory", __FILE__, __LINE__);
    counters_.reserved(size);
    return p;
  }

  // Blocks whose every use completed become free.
  void process_pending() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool done = true;
      for (const PinnedUse& u : it->uses) {
        const cudaError_t err = cudaEventQuery(u.event);
        if (err == cudaErrorNotReady) {
          (void)cudaGetLastError();
          done = false;
          break;
        }
        if (err != cudaSuccess) {
          throw_cuda_error(err, "cudaEventQuery", "pin_memory", __FILE__, __LINE__);
        }
      }
      if (!done) {
        ++it;
        continue;
      }
      for (const PinnedUse& u : it->uses) EventPool::instance().release(u.device, u.event);
      free_.emplace(it->size, it->ptr);
      it = pending_.erase(it);
    }
  }

  void wait_pending() {
    for (Pending& p : pending_) {
      for (const PinnedUse& u : p.uses) THD_CUDA_CHECK(cudaEventSynchronize(u.event), "pin_memory");
    }
    process_pending();
  }

  void free_cached() {
    for (auto it = free_.begin(); it != free_.end();) {
      THD_CUDA_CHECK(cudaFreeHost(it->second), "empty_cache");
      counters_.released(it->first);
      it = free_.erase(it);
    }
  }

  std::mutex mu_;  // guards everything below
  std::multimap<size_t, void*> free_;
  std::list<Pending> pending_;
  AllocationCounters counters_;
};

}  // namespace

MemoryStats pinned_memory_stats() { return PinnedCache::instance().stats(); }

void empty_pinned_cache() { PinnedCache::instance().empty_cache(); }

}  // namespace detail

PinnedBuffer::PinnedBuffer(size_t nbytes) {
  data_ = detail::PinnedCache::instance().acquire(nbytes, &size_);
}

PinnedBuffer::~PinnedBuffer() { reset(); }

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      uses_(std::move(other.uses_)) {
  other.uses_.clear();
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    uses_ = std::move(other.uses_);
    other.uses_.clear();
  }
  return *this;
}

void PinnedBuffer::reset() noexcept {
  if (data_ == nullptr) return;
  detail::PinnedCache::instance().release(data_, size_, std::move(uses_));
  data_ = nullptr;
  size_ = 0;
  uses_.clear();
}

void PinnedBuffer::record_use(cudaStream_t stream, int device) {
  cudaEvent_t e = detail::EventPool::instance().acquire(device);
  DeviceGuard guard(device);
  const cudaError_t err = cudaEventRecord(e, stream);
  if (err != cudaSuccess) {
    detail::EventPool::instance().release(device, e);
    detail::throw_cuda_error(err, "cudaEventRecord", "copy_", __FILE__, __LINE__);
  }
  uses_.push_back({device, e});
}

void PinnedBuffer::wait_uses() {
  while (!uses_.empty()) {
    const detail::PinnedUse u = uses_.back();
    THD_CUDA_CHECK(cudaEventSynchronize(u.event), "copy_");
    uses_.pop_back();
    detail::EventPool::instance().release(u.device, u.event);
  }
}

}  // namespace thd::cuda
