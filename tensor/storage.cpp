#include <thd/storage.h>

#include <cstdlib>
#include <new>

#include "tensor/check.h"

namespace thd {
namespace {
// Cache-line alignment keeps vector loads aligned and avoids false sharing between
// threads writing neighbouring tensors.
constexpr size_t kAlignment = 64;
}  // namespace

StorageImpl::StorageImpl(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  THD_CHECK(device.is_cpu(), ValueError, "allocate",
            "device {} is not available in this build (CPU only)", device.str());
  size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  data_ = std::aligned_alloc(kAlignment, rounded);
  if (data_ == nullptr) {
    THD_THROW(ValueError, "allocate", "out of memory allocating {} bytes on {}", nbytes,
              device.str());
  }
  deleter_ = [](void* p) { std::free(p); };
}

StorageImpl::StorageImpl(void* data, size_t nbytes, Device device, Deleter deleter)
    : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)) {}

StorageImpl::~StorageImpl() {
  if (deleter_) deleter_(data_);
}

}  // namespace thd
