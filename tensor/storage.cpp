#include <thd/storage.h>

#include <cstdint>
#include <cstdlib>
#include <new>

#include <thd/config.h>
#include <thd/memory.h>

#include "tensor/check.h"
#include "tensor/cpu_allocator.h"
#include "tensor/storage_alloc.h"

#if THD_WITH_CUDA
#include "tensor/cuda/caching_allocator.h"
#include "tensor/cuda/cuda_stream.h"
#endif

namespace thd {

using detail::CpuAllocator;

StorageImpl::StorageImpl(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  detail::check_device_available(device, "allocate");
#if THD_WITH_CUDA
  if (device.is_cuda()) {
    const int index = device.index();
    auto& allocator = cuda::detail::CachingAllocator::instance();
    data_ = allocator.allocate(nbytes, index, cuda::current_stream(index));
    deleter_ = [index](void* p) { cuda::detail::CachingAllocator::instance().deallocate(p, index); };
    return;
  }
#endif
  size_t allocated = 0;
  data_ = CpuAllocator::instance().allocate(nbytes, &allocated);
  if (data_ == nullptr) {
    THD_THROW(HostOutOfMemoryError, "allocate", "out of memory allocating {} bytes on {}", nbytes,
              device.str());
  }
  deleter_ = [allocated](void* p) { CpuAllocator::instance().deallocate(p, allocated); };
}

StorageImpl::StorageImpl(void* data, size_t nbytes, Device device, Deleter deleter)
    : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)) {}

StorageImpl::StorageImpl(Meta, size_t nbytes, Device device) : nbytes_(nbytes), device_(device), meta_(true) {}

StorageImpl::~StorageImpl() {
  if (deleter_) deleter_(data_);
}

namespace detail {
namespace {

[[noreturn]] void throw_out_of_memory(size_t nbytes, Device device) {
  THD_THROW(HostOutOfMemoryError, "allocate", "out of memory allocating {} bytes on {}", nbytes,
            device.str());
}

// The allocator std::allocate_shared builds a small storage with. Every block it
// hands out has room for `nbytes` of data, 64-byte aligned, behind the object it is
// asked for (the control block, which holds the StorageImpl); construct() builds the
// StorageImpl over the bytes behind itself, so a small storage costs one block where
// StorageImpl(nbytes, device) costs two, and the block is one the CPU allocator may
// keep for the next small storage when this one goes.
template <typename T>
class TrailingDataAllocator {
 public:
  using value_type = T;

  explicit TrailingDataAllocator(size_t nbytes) : nbytes_(nbytes) {}
  template <typename U>
  TrailingDataAllocator(const TrailingDataAllocator<U>& other)  // NOLINT: rebinding
      : nbytes_(other.nbytes()) {}

  size_t nbytes() const { return nbytes_; }
  size_t block_bytes(size_t n) const { return n * sizeof(T) + CpuAllocator::kAlignment - 1 + nbytes_; }

  T* allocate(size_t n) {
    void* p = CpuAllocator::instance().allocate_small(block_bytes(n), nbytes_);
    if (p == nullptr) throw_out_of_memory(nbytes_, Device::cpu());
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) { CpuAllocator::instance().deallocate_small(p, block_bytes(n), nbytes_); }

  // The object lies inside a block from allocate(), so the data fits behind it.
  void construct(StorageImpl* p, Device device) {
    const auto end = reinterpret_cast<uintptr_t>(p + 1);
    constexpr uintptr_t a = CpuAllocator::kAlignment;
    void* data = reinterpret_cast<void*>((end + a - 1) & ~(a - 1));
    ::new (static_cast<void*>(p)) StorageImpl(data, nbytes_, device, nullptr);
  }
  void destroy(StorageImpl* p) { p->~StorageImpl(); }

  template <typename U>
  bool operator==(const TrailingDataAllocator<U>&) const {
    return true;  // any of them frees any block
  }

 private:
  size_t nbytes_;  // of data; copies and rebound copies keep it, and so know what to free
};

}  // namespace

Storage allocate_storage(size_t nbytes, Device device) {
  if (device.is_cpu() && nbytes < CpuAllocator::kLargeBlock) {
    return std::allocate_shared<StorageImpl>(TrailingDataAllocator<StorageImpl>(nbytes), device);
  }
  return std::make_shared<StorageImpl>(nbytes, device);
}

}  // namespace detail

// On a CUDA device these reach its caching allocator; check_device_available has
// thrown for any CUDA device by then in a build without CUDA.
MemoryStats memory_stats(Device device) {
  detail::check_device_available(device, "memory_stats");
#if THD_WITH_CUDA
  if (device.is_cuda()) return cuda::detail::CachingAllocator::instance().stats(device.index());
#endif
  return CpuAllocator::instance().stats();
}

void reset_peak_memory_stats(Device device) {
  detail::check_device_available(device, "reset_peak_memory_stats");
#if THD_WITH_CUDA
  if (device.is_cuda()) return cuda::detail::CachingAllocator::instance().reset_peak(device.index());
#endif
  CpuAllocator::instance().reset_peak();
}

void empty_cache(Device device) {
  detail::check_device_available(device, "empty_cache");
#if THD_WITH_CUDA
  if (device.is_cuda()) return cuda::detail::CachingAllocator::instance().empty_cache(device.index());
#endif
  CpuAllocator::instance().empty_cache();
}

}  // namespace thd
