// The devices of a worker node: which GPUs a master may place tensors on, and how
// much memory each has. A master names a device by its index on the node
// (Device::cuda(i) is the node's GPU i); the node checks it before it allocates, so a
// device it does not have is an error reply that says what the node has, never a
// crash in the CUDA runtime.
#pragma once

#include <cstddef>
#include <string>

#include <thd/device.h>

namespace thd::worker {

// GPUs this worker process can use: 0 in a build without CUDA, without a driver or
// without a GPU.
int cuda_device_count();

// ValueError naming the node, the device and the GPUs this worker has, unless
// `device` is the CPU or a GPU of this worker.
void check_device(int node, Device device, const std::string& op);

// The memory of GPU `index` of this worker, in bytes (0 when unknown).
size_t device_total_memory(int index);

}  // namespace thd::worker
