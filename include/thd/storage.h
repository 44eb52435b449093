// The memory behind one or more tensors. Tensors that are views of each other share
// one Storage; it is freed when the last of them goes away.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include <thd/device.h>

namespace thd {

class StorageImpl {
 public:
  using Deleter = std::function<void(void*)>;

  // Allocates nbytes on device: 64-byte aligned host memory for the CPU, a block of
  // that device's caching allocator (tensor/cuda/caching_allocator.h) for CUDA.
  StorageImpl(size_t nbytes, Device device);
  // Wraps memory someone else owns; deleter (may be empty) runs when the storage dies.
  StorageImpl(void* data, size_t nbytes, Device device, Deleter deleter);
  // A meta storage: nbytes on device described, none held (data() is null). Tensors
  // over it have shapes, strides, views and dtypes; every op that reads or writes
  // elements refuses them (docs/tensor.md, "Meta storage").
  struct Meta {};
  StorageImpl(Meta, size_t nbytes, Device device);
  ~StorageImpl();

  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool is_meta() const { return meta_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Deleter deleter_;
  bool meta_ = false;
};

using Storage = std::shared_ptr<StorageImpl>;

}  // namespace thd
