// Storage for new tensors.
#pragma once

#include <cstddef>

#include <thd/device.h>
#include <thd/storage.h>

namespace thd::detail {

// nbytes of new, uninitialised storage on `device`, 64-byte aligned (512 on a CUDA
// device). A small CPU storage is a single heap block: the shared_ptr control block,
// the StorageImpl in it, then the data. A CUDA storage comes from that device's
// caching allocator, for use in order on the device's current stream
// (tensor/cuda/caching_allocator.h). Throws HostOutOfMemoryError for a CPU out of memory,
// ValueError for a CUDA device out of range, OutOfMemoryError for a CUDA device out of memory, and
// NotImplementedError for a CUDA device in a build without CUDA.
Storage allocate_storage(size_t nbytes, Device device);

// Throws unless `device` exists in this process: ValueError naming the device and
// the count for a CUDA index out of range, NotImplementedError for any CUDA device
// in a build without CUDA. `op` names the caller.
void check_device_available(Device device, const char* op);

}  // namespace thd::detail
