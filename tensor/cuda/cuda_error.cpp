#include "tensor/cuda/cuda_check.h"

#include <fmt/format.h>

#include <thd/error.h>

#include "tensor/check.h"

namespace thd::cuda::detail {

void throw_cuda_error(cudaError_t err, const char* call, const char* op, const char* file,
                      int line) {
  // Clear a sticky-free error so the next call on this thread does not report it
  // again; a sticky error (a kernel fault) stays, and every later call names it.
  (void)cudaGetLastError();
  std::string message =
      fmt::format("{}: {} (in {})", cudaGetErrorName(err), cudaGetErrorString(err), call);
  ErrorContext ctx = thd::detail::context_here(op, file, line);
  if (err == cudaErrorMemoryAllocation) throw OutOfMemoryError(std::move(message), std::move(ctx));
  throw CudaError(std::move(message), std::move(ctx));
}

}  // namespace thd::cuda::detail
