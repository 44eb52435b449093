// A pool of CUDA events per device, for the allocators' bookkeeping: marking where on
// a stream a block was last used costs one cudaEventRecord, not an event creation.
#pragma once

#include <cuda_runtime_api.h>

namespace thd::cuda::detail {

// Events come without timing (cheaper to record and query) unless asked for, and
// belong to the device they were created on: record one only on a stream of that
// device. The pool is never destroyed (at process exit the driver may already be
// gone). release() makes no CUDA call, so it may run where CUDA calls may not (a
// host function queued on a stream).
class EventPool {
 public:
  static EventPool& instance();

  // An event of `device`, made there if none is free; with timing for
  // cudaEventElapsedTime when `timing`. Throws CudaError.
  cudaEvent_t acquire(int device, bool timing = false);
  // Gives an event back (to the list of its kind) once nothing waits on it any
  // more. Never throws.
  void release(int device, cudaEvent_t event, bool timing = false) noexcept;
};

}  // namespace thd::cuda::detail
