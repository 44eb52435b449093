// cuBLAS and cublasLt handles for the matrix products on CUDA tensors.
//
// A cuBLAS handle carries state (stream, workspace, pointer mode) and must not be
// used by two threads at once, so each thread leases its own per device from a
// process-wide pool, lazily, and gives it back to the pool when the thread exits.
// Handles are never destroyed: the pool outlives static destruction (it is never
// freed), so no cublasDestroy runs after the driver or the library has gone away.
//
// Math mode: cuBLAS's default, so float32 GEMMs run in full float32 (no TF32) and
// match the CPU within float32 tolerance; reductions of split-K partial sums of the
// 16-bit types stay in float32 (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION),
// so a float16/bfloat16 product is rounded once, like the CPU's.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include <thd/tensor.h>

namespace thd::cuda {

namespace detail {

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* op,
                                     const char* file, int line);

}  // namespace detail

// THD_CUBLAS_CHECK(cublasGemmEx(...), "matmul"): a failure is a thd::CudaError naming
// the op, the call and cuBLAS's description of the status.
#define THD_CUBLAS_CHECK(call, op)                                                          \
  do {                                                                                      \
    const cublasStatus_t thd_cublas_status_ = (call);                                       \
    if (thd_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {                         \
      ::thd::cuda::detail::throw_cublas_error(thd_cublas_status_, #call, op, __FILE__,      \
                                              __LINE__);                                    \
    }                                                                                       \
  } while (0)

// Workspace each stream lends cuBLAS and cublasLt: NVIDIA's recommendation for Hopper,
// room for the split-K and stream-K kernels the heuristics pick for large products.
inline constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;

// A workspace and what keeps it allocated: hold `owner` until the work that uses the
// memory is queued. Freed, the memory goes back to the caching allocator, which
// reuses it only for work queued later on the stream it was allocated on.
struct BlasWorkspace {
  Tensor owner;
  void* data = nullptr;
  size_t bytes = 0;
};

// The workspace of `stream` on `device`, from the caching allocator (an allocation
// failure raises its OutOfMemoryError). Work on one stream runs in order, so every
// handle issuing to that stream may share it. A few recently used streams keep theirs
// cached; a program cycling through many streams does not pile up 32 MiB per stream.
// (cudaStreamPerThread names a different stream in every thread: do not use it as a
// thread's current stream with these products.)
BlasWorkspace blas_workspace(int device, cudaStream_t stream);

// This thread's cuBLAS handle on `device`, bound to `stream` and its workspace, with
// host pointer mode. `device` must be current (DeviceGuard). The handle stays this
// thread's, and keeps the workspace it is bound to allocated; a later call may rebind
// it to another stream.
cublasHandle_t blas_handle(int device, cudaStream_t stream, const char* op);

// This thread's cublasLt handle on `device` (`device` current). It holds no stream:
// cublasLtMatmul takes the stream and the workspace with each call.
cublasLtHandle_t blaslt_handle(int device, const char* op);

}  // namespace thd::cuda
