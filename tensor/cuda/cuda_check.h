// Checking CUDA calls. Every CUDA runtime and library call in thd goes through one
// of these, so a failure is a thd::CudaError naming the op, the call and CUDA's own
// description of the error, never an ignored status.
#pragma once

#include <cuda_runtime_api.h>

namespace thd::cuda::detail {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* op,
                                   const char* file, int line);

}  // namespace thd::cuda::detail

// THD_CUDA_CHECK(cudaMemcpyAsync(...), "copy_")
#define THD_CUDA_CHECK(call, op)                                                      \
  do {                                                                                \
    const cudaError_t thd_cuda_err_ = (call);                                         \
    if (thd_cuda_err_ != cudaSuccess) [[unlikely]] {                                  \
      ::thd::cuda::detail::throw_cuda_error(thd_cuda_err_, #call, op, __FILE__, __LINE__); \
    }                                                                                 \
  } while (0)

// After a kernel launch: launch errors (bad configuration, no kernel image for this
// GPU) surface here, at the op that launched, rather than at some later call.
#define THD_CUDA_CHECK_LAUNCH(op) THD_CUDA_CHECK(cudaPeekAtLastError(), op)
