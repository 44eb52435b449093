// What every GPU test uses: the skip when there is no GPU, fresh random inputs,
// poisoned outputs, and comparison of a CUDA result with the CPU's.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <thd/config.h>
#include <thd/cuda.h>
#include <thd/tensor.h>

// First statement of every GPU test.
#define THD_REQUIRE_CUDA()                                              \
  do {                                                                  \
    if (!::thd::cuda::is_available()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

// A test of what NCCL does: a build with CUDA but without it (THD_WITH_NCCL found
// no NCCL) stages every collective through host memory.
#define THD_REQUIRE_NCCL()                                                                  \
  do {                                                                                      \
    if (!THD_WITH_NCCL) GTEST_SKIP() << "built without NCCL (THD_WITH_NCCL is off)"; \
  } while (0)

namespace thd::testing {

// Fresh random values of dtype on the CPU: floats normal, integers in [-50, 50)
// (uint8 in [0, 100)), bools half true. A new seed each call.
Tensor random_cpu(const Shape& shape, DType dtype);

// An uninitialised-looking CUDA tensor: every byte 0xFF (NaN for floats, -1 or the
// maximum for integers), so an element a kernel forgets to write shows up.
Tensor poisoned_cuda(const Shape& shape, DType dtype, int device = 0);

// Asserts that `gpu` (a CUDA tensor) equals `cpu` (the CPU result) in shape and
// dtype, and elementwise: exactly for integers and bools; for floats within
// rtol * |cpu| + atol, NaN matching NaN. The defaults suit float32; pass wider ones
// for float16/bfloat16 (tolerance_for).
void expect_matches_cpu(const Tensor& gpu, const Tensor& cpu, double rtol = -1, double atol = -1);

// A non-blocking stream made for one test and destroyed with it (synchronized first).
class OwnedStream {
 public:
  OwnedStream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), cudaSuccess); }
  ~OwnedStream() {
    EXPECT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(s_), cudaSuccess);
  }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// (rtol, atol) for results computed in dtype: float32 1e-5/1e-6, float64 1e-12,
// float16 1e-3, bfloat16 1e-2 (relative), 0 for exact types.
std::pair<double, double> tolerance_for(DType dtype);

}  // namespace thd::testing
