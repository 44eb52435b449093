// The CUDA stream tensor ops on a device are issued to. Kernels and copies launch on
// current_stream(device) and never synchronize themselves: like torch, an op on a
// CUDA tensor is asynchronous, and reading the result on the host (item(),
// to_vector(), copying to the CPU) waits for that stream.
#pragma once

#include <cuda_runtime_api.h>

namespace thd::cuda {

// This thread's current stream on `device`: the one a StreamGuard names, else the
// one this thread's StreamSource gives, else the legacy default stream.
cudaStream_t current_stream(int device);

// Supplies a thread's current streams while a StreamSourceScope installs it: a
// worker stream's own CUDA streams (worker/gpu_streams.h). Asked on every
// current_stream() call not covered by a StreamGuard, so it answers cheaply.
class StreamSource {
 public:
  virtual ~StreamSource() = default;
  virtual cudaStream_t stream_for(int device) = 0;
};

// Makes `source` this thread's StreamSource; returns the one it replaces.
StreamSource* exchange_stream_source(StreamSource* source);

// Makes `source` this thread's StreamSource until destroyed; restores the previous.
class StreamSourceScope {
 public:
  explicit StreamSourceScope(StreamSource* source);
  ~StreamSourceScope();
  StreamSourceScope(const StreamSourceScope&) = delete;
  StreamSourceScope& operator=(const StreamSourceScope&) = delete;

 private:
  StreamSource* previous_;
};

// A stream of `device` from the process's pool (made on first need, blocking with
// respect to the legacy default stream, so that stream's legacy semantics hold),
// and its return. Streams are reused, never destroyed: the caching allocator keys
// cached blocks by stream, and a destroyed stream's handle could come back for an
// unrelated new one that is not ordered after the old one's work.
cudaStream_t acquire_pooled_stream(int device, bool high_priority);
void release_pooled_stream(int device, cudaStream_t stream, bool high_priority);

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
