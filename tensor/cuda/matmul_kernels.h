// The matrix-product kernels thd writes itself (matmul_kernels.cu): integer GEMM,
// which cuBLAS does not offer, and dot products of every dtype. Launched by
// matmul.cpp, which validates shapes and dtypes first; this header is shared by host
// and device code, so it stays free of fmt and of thd's CPU headers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include <thd/dtype.h>

namespace thd::cuda {

// c = alpha * (a @ b) + beta * c (beta * c only when use_self) for `batches` products
// of [n, k] x [k, m] integer matrices of one dtype (uint8, int8, int32, int64), with
// any element strides, in wrapping arithmetic (unsigned, as the CPU: overflow keeps
// the low bits like two's complement). Strides are in elements; c's rows are
// contiguous (row stride m). alpha and beta are converted like the CPU's
// static_cast<unsigned>(int64).
struct IntegerGemm {
  DType dtype;
  int64_t n, m, k;
  const void* a;
  int64_t a_row, a_col, a_batch;
  const void* b;
  int64_t b_row, b_col, b_batch;
  void* c;
  int64_t c_batch;
  int64_t batches;
  bool use_self;
  int64_t alpha, beta;
};
void launch_integer_gemm(const IntegerGemm& g, cudaStream_t stream, const char* op);

// *out = sum over i < n of a[i * a_stride] * b[i * b_stride], in dtype's result:
// floats accumulate in double and round once (float16/bfloat16 through float, as the
// CPU), integers wrap. Two launches: `blocks` partial sums (8 bytes each) into
// `partials`, then one block adds them up. n may be 0 (the result is 0).
struct DotProduct {
  DType dtype;
  int64_t n;
  const void* a;
  int64_t a_stride;
  const void* b;
  int64_t b_stride;
  void* out;
  void* partials;
  int blocks;
};
// Blocks for a dot product of n elements: enough to fill a GPU, at most kDotMaxBlocks.
inline constexpr int kDotMaxBlocks = 512;
int dot_blocks(int64_t n);
void launch_dot(const DotProduct& d, cudaStream_t stream, const char* op);

}  // namespace thd::cuda
