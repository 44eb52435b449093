// One floating-point GEMM problem handed to cuBLAS, in cuBLAS's column-major terms:
// C[m, n] = alpha * op(A)[m, k] op(B)[k, n] + beta * C, `count` times at the given
// batch strides. matmul.cpp turns thd's row-major products into these.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace thd::cuda {

struct GemmProblem {
  cudaDataType_t type;  // of A, B and C: CUDA_R_16F, CUDA_R_16BF, CUDA_R_32F, CUDA_R_64F
  cublasOperation_t trans_a, trans_b;
  int64_t m, n, k;  // each in 1..INT_MAX
  int64_t lda, ldb, ldc;
  int64_t stride_a, stride_b, stride_c;  // elements between batch entries (0: broadcast)
  int64_t count;                         // 1..INT_MAX
};

// alpha and beta in both types a GEMM may compute in: gemm() passes the double ones
// for CUDA_R_64F and the float ones otherwise (float16/bfloat16 accumulate in float).
struct GemmScales {
  GemmScales(double alpha, double beta)
      : alpha_f(static_cast<float>(alpha)), beta_f(static_cast<float>(beta)), alpha_d(alpha),
        beta_d(beta) {}
  float alpha_f, beta_f;
  double alpha_d, beta_d;
};

// Issues the GEMM on `stream` (`device` current). 16-bit types go to cublasLt with
// the heuristic's best algorithm for this problem and alignment, cached, or to
// cublasGemmEx when cublasLt offers none; float32/float64 to cublasGemmEx (no TF32).
// With beta == 0, C is written without being read (NaNs in it do not propagate).
void gemm(const GemmProblem& p, const void* a, const void* b, void* c, const GemmScales& s,
          int device, cudaStream_t stream, const char* op);

}  // namespace thd::cuda
