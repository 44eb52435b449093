// A pool of CUDA events per device, for the allocators' bookkeeping: marking where on
// a stream a block was last used costs one cudaEventRecord, not an event creation.
#pragma once

#include <cuda_runtime_api.h>

namespace thd::cuda::detail {

// Events come without timing (cheaper to record and query) and belong to the device
// they were created on: record one only on a stream of that device. The pool is
// never destroyed (at process exit the driver may already be gone).
class EventPool {
 public:
  static EventPool& instance();

  // An event of `device`, made there if none is free. Throws CudaError.
  cudaEvent_t acquire(int device);
  // Gives an event back once nothing waits on it any more. Never throws.
  void release(int device, cudaEvent_t event) noexcept;
};

}  // namespace thd::cuda::detail
