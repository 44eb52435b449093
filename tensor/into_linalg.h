// Matrix products written into an existing tensor: BLAS (cuBLAS on a CUDA device)
// writes `out` itself, with beta = 0 for the products and beta for addmm's self,
// which is copied into `out` first as the allocating op does. For a caller that
// keeps a result's storage from one run of an op to the next (a worker's graph
// replays, docs/graphs.md).
//
// `out` must be contiguous, of the result's shape and dtype, on the operands'
// device, and share no storage with any operand; float16 and bfloat16 products on
// the CPU (computed in float32 and rounded) are not written in place, and dot
// products (dot, a matmul of two vectors) and outer products only on the CPU (with
// thd's kernels: the dot's BLAS or accumulating loop, outer's row loop). Each returns true when it wrote `out` with the very values the allocating
// op would have made, and false, with nothing written, for anything else: the
// caller then runs the op as usual. An operand the op refuses raises the op's error.
#pragma once

#include <thd/scalar.h>
#include <thd/tensor.h>

namespace thd::detail {

enum class IntoMatmul { Matmul, Mm, Bmm, Dot, Outer };

bool matmul_into(IntoMatmul kind, const Tensor& out, const Tensor& a, const Tensor& b);
// out = beta * self + alpha * (mat1 @ mat2).
bool addmm_into(const Tensor& out, const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                const Scalar& alpha);

}  // namespace thd::detail
