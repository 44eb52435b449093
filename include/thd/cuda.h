// The CUDA devices of this process (torch.cuda's module functions). In a build
// without CUDA (THD_WITH_CUDA=OFF) device_count() is 0 and the rest throw
// NotImplementedError.
#pragma once

#include <array>
#include <cstdint>

namespace thd::cuda {

// GPUs this process can use; 0 without CUDA, without a driver or without a GPU.
int device_count();
bool is_available();
// Waits for all work on `device` (every device when -1) to finish; raises the
// first asynchronous CUDA error any of it hit.
void synchronize(int device = -1);
// The GPU's 16-byte UUID (torch.cuda.get_device_properties(i).uuid): the same for
// every process that sees this GPU, whatever its CUDA_VISIBLE_DEVICES, and
// different for every other GPU on any host. ValueError for a device out of range.
std::array<uint8_t, 16> device_uuid(int device);

}  // namespace thd::cuda
