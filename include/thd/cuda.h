// The CUDA devices of this process (torch.cuda's module functions). In a build
// without CUDA (THD_WITH_CUDA=OFF) device_count() is 0 and the rest throw
// NotImplementedError.
#pragma once

namespace thd::cuda {

// GPUs this process can use; 0 without CUDA, without a driver or without a GPU.
int device_count();
bool is_available();
// Waits for all work on `device` (every device when -1) to finish; raises the
// first asynchronous CUDA error any of it hit.
void synchronize(int device = -1);

}  // namespace thd::cuda
