// Matrix products on CUDA tensors: the device half of tensor/linalg.cpp, which checks
// shapes, dtypes and devices and allocates the result before calling these.
//
// Floating types run in cuBLAS on the operands' own memory: a row-major or column-
// major operand (any leading dimension) is passed as it is, with the transpose flag,
// and only layouts cuBLAS cannot express (stride-0 rows, no unit stride) are copied
// first. float32 computes in full float32: TF32 stays off so results match the CPU
// within float32 tolerance. float64 is DGEMM. float16/bfloat16 accumulate in float32
// and round once, through cublasLt (heuristic algorithm per problem, cached; a 32 MiB
// workspace per stream) and cublasGemmEx where cublasLt has no algorithm. Integers
// use thd's own tiled kernel (matmul_kernels.cu) with the CPU's wrapping arithmetic.
// Batches whose dims collapse to one stride are one strided-batched call; other
// broadcasts loop over the outer batch dims. Everything is asynchronous on
// current_stream(device).
#pragma once

#include <thd/tensor.h>

namespace thd::cuda {

// out = alpha * (a @ b), plus beta * out when use_self (out then already holds self
// broadcast to its shape). out: contiguous, shape batch + [n, m], numel() > 0; a
// [..., n, k] and b [..., k, m] on out's device with out's dtype (not bool), their
// batch dims broadcasting to `batch`. k may be 0: out becomes zeros, or beta * self.
void matrix_product(const Tensor& out, Tensor a, Tensor b, const Shape& batch, bool use_self,
                    const Scalar& beta, const Scalar& alpha, const char* op);

// out (0-dim, a's dtype and device) = the dot product of the 1-D tensors a and b
// (same length, dtype and device; any strides).
void dot_product(const Tensor& out, const Tensor& a, const Tensor& b, const char* op);

}  // namespace thd::cuda
