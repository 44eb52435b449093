#include <thd/storage.h>


#include <thd/memory.h>

#include "tensor/check.h"
#include "tensor/cpu_allocator.h"

namespace thd {

using detail::CpuAllocator;

StorageImpl::StorageImpl(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  THD_CHECK(device.is_cpu(), ValueError, "allocate",
            "device {} is not available in this build (CPU only)", device.str());
  size_t allocated = 0;
  data_ = CpuAllocator::instance().allocate(nbytes, &allocated);
  if (data_ == nullptr) {
    THD_THROW(ValueError, "allocate", "out of memory allocating {} bytes on {}", nbytes,
              device.str());
  }
  deleter_ = [allocated](void* p) { CpuAllocator::instance().deallocate(p, allocated); };
}

StorageImpl::StorageImpl(void* data, size_t nbytes, Device device, Deleter deleter)
    : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)) {}

StorageImpl::~StorageImpl() {
  if (deleter_) deleter_(data_);
}

namespace {
void check_cpu(Device device, const char* op) {
  THD_CHECK(device.is_cpu(), ValueError, op, "device {} is not available in this build",
            device.str());
}
}  // namespace

MemoryStats memory_stats(Device device) {
  check_cpu(device, "memory_stats");
  return CpuAllocator::instance().stats();
}

void reset_peak_memory_stats(Device device) {
  check_cpu(device, "reset_peak_memory_stats");
  CpuAllocator::instance().reset_peak();
}

void empty_cache(Device device) {
  check_cpu(device, "empty_cache");
  CpuAllocator::instance().empty_cache();
}

}  // namespace thd
