// The CUDA stream tensor ops on a device are issued to. Kernels and copies launch on
// current_stream(device) and never synchronize themselves: like torch, an op on a
// CUDA tensor is asynchronous, and reading the result on the host (item(),
// to_vector(), copying to the CPU) waits for that stream.
#pragma once

#include <cuda_runtime_api.h>

namespace thd::cuda {

// This thread's current stream on `device` (the legacy default stream until a
// StreamGuard names another).
cudaStream_t current_stream(int device);

// Makes `stream` the current stream of `device` for this thread, and the device
// current, until destroyed; restores both.
class StreamGuard {
 public:
  StreamGuard(int device, cudaStream_t stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  int previous_device_;
  cudaStream_t previous_stream_;
};

// Makes `device` current for this thread until destroyed (cudaSetDevice), restoring
// the previous one; cheap when it already is.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

}  // namespace thd::cuda
