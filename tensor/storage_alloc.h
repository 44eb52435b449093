// Storage for new tensors.
#pragma once

#include <cstddef>

#include <thd/device.h>
#include <thd/storage.h>

namespace thd::detail {

// nbytes of new, uninitialised storage on `device`, 64-byte aligned. A small
// storage is a single heap block: the shared_ptr control block, the StorageImpl in
// it, then the data. Throws ValueError when out of memory or the device is absent.
Storage allocate_storage(size_t nbytes, Device device);

}  // namespace thd::detail
