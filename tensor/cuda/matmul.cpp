#include "tensor/cuda/matmul.h"

#include <algorithm>
#include <array>
#include <climits>
#include <vector>

#include "tensor/check.h"
#include "tensor/cuda/cuda_stream.h"
#include "tensor/cuda/gemm.h"
#include "tensor/cuda/matmul_kernels.h"
#include "tensor/dtype_set.h"

namespace thd::cuda {
namespace {

// How cuBLAS, which is column-major, reads a [rows, cols] matrix with element strides
// (s0, s1), rows, cols >= 1. A row-major matrix is, to cuBLAS, its own transpose
// stored untransposed (CUBLAS_OP_N); a column-major one needs CUBLAS_OP_T.
struct Operand {
  bool ok = false;
  cublasOperation_t trans = CUBLAS_OP_N;
  int64_t ld = 0;
};

Operand gemm_operand(int64_t rows, int64_t cols, int64_t s0, int64_t s1) {
  // The stride of a size-1 dim is never followed, so any valid leading dim will do.
  if ((cols == 1 || s1 == 1) && (rows == 1 || (s0 >= cols && s0 <= INT_MAX))) {
    return {true, CUBLAS_OP_N, rows == 1 ? cols : s0};
  }
  if ((rows == 1 || s0 == 1) && (cols == 1 || (s1 >= rows && s1 <= INT_MAX))) {
    return {true, CUBLAS_OP_T, cols == 1 ? rows : s1};
  }
  return {};
}

Shape with_matrix(Shape batch, int64_t rows, int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

// The batch of products as few strided-batched calls: the innermost batch dims whose
// strides chain (in a, b and c alike) fold into one run of `count` products at fixed
// strides; the remaining outer dims are enumerated, one call each.
struct BatchPlan {
  int64_t count = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  std::vector<std::array<int64_t, 3>> starts;  // element offsets (a, b, c) of each run
};

// a_strides / b_strides: the operands' strides once expanded to batch + matrix dims;
// c is contiguous with matrices of matrix_numel elements.
BatchPlan plan_batches(const Shape& batch, const Shape& a_strides, const Shape& b_strides,
                       int64_t matrix_numel) {
  struct Dim {
    int64_t size, sa, sb, sc;
  };
  std::vector<Dim> dims;
  int64_t sc = matrix_numel;
  for (size_t d = batch.size(); d-- > 0;) {
    if (batch[d] != 1) dims.push_back({batch[d], a_strides[d], b_strides[d], sc});
    sc *= batch[d];
  }
  std::reverse(dims.begin(), dims.end());
  BatchPlan plan;
  size_t outer = dims.size();
  if (outer > 0) {
    Dim run = dims[--outer];
    while (outer > 0) {
      const Dim& d = dims[outer - 1];
      if (d.sa != run.sa * run.size || d.sb != run.sb * run.size || d.sc != run.sc * run.size) {
        break;
      }
      run.size *= d.size;
      --outer;
    }
    plan.count = run.size;
    plan.stride_a = run.sa;
    plan.stride_b = run.sb;
    plan.stride_c = run.sc;
  }
  int64_t runs = 1;
  for (size_t d = 0; d < outer; ++d) runs *= dims[d].size;
  plan.starts.reserve(static_cast<size_t>(runs));
  std::vector<int64_t> idx(outer, 0);
  std::array<int64_t, 3> cur{0, 0, 0};
  for (int64_t r = 0; r < runs; ++r) {
    plan.starts.push_back(cur);
    for (size_t d = outer; d-- > 0;) {
      cur[0] += dims[d].sa;
      cur[1] += dims[d].sb;
      cur[2] += dims[d].sc;
      if (++idx[d] < dims[d].size) break;
      cur[0] -= idx[d] * dims[d].sa;
      cur[1] -= idx[d] * dims[d].sb;
      cur[2] -= idx[d] * dims[d].sc;
      idx[d] = 0;
    }
  }
  return plan;
}

BatchPlan plan_for(const Tensor& a, const Tensor& b, const Shape& batch, int64_t n, int64_t m,
                   int64_t k) {
  return plan_batches(batch, a.expand(with_matrix(batch, n, k)).strides(),
                      b.expand(with_matrix(batch, k, m)).strides(), n * m);
}

cudaDataType_t cuda_type(DType dt, const char* op) {
  switch (dt) {
    case kFloat16: return CUDA_R_16F;
    case kBFloat16: return CUDA_R_16BF;
    case kFloat32: return CUDA_R_32F;
    case kFloat64: return CUDA_R_64F;
    default: break;
  }
  thd::detail::throw_unsupported_dtype(op, dt, thd::detail::kFloatingSet);
}

const char* at(const Tensor& t, int64_t elements) {
  return static_cast<const char*>(t.data_ptr()) + elements * static_cast<int64_t>(t.element_size());
}

// cuBLAS for the floating types: C^T = B^T A^T in column-major terms, so thd's b is
// cuBLAS's A and thd's a its B; out (row-major [n, m]) is C^T with ld m.
void float_product(const Tensor& out, Tensor a, Tensor b, const Shape& batch, bool use_self,
                   const Scalar& beta, const Scalar& alpha, int device, cudaStream_t stream,
                   const char* op) {
  const int64_t n = out.size(-2), m = out.size(-1), k = a.size(-1);
  THD_CHECK(n <= INT_MAX && m <= INT_MAX && k <= INT_MAX, ValueError, op,
            "matrix sizes {}x{} and {}x{} exceed cuBLAS's 32-bit index range", n, k, k, m);
  Operand la = gemm_operand(n, k, a.stride(-2), a.stride(-1));
  if (!la.ok) {
    a = a.contiguous();
    la = gemm_operand(n, k, a.stride(-2), a.stride(-1));
  }
  Operand lb = gemm_operand(k, m, b.stride(-2), b.stride(-1));
  if (!lb.ok) {
    b = b.contiguous();
    lb = gemm_operand(k, m, b.stride(-2), b.stride(-1));
  }
  const BatchPlan plan = plan_for(a, b, batch, n, m, k);
  const GemmScales scales(alpha.to_double(), use_self ? beta.to_double() : 0.0);
  GemmProblem p{};
  p.type = cuda_type(out.dtype(), op);
  p.trans_a = lb.trans;
  p.trans_b = la.trans;
  p.m = m;
  p.n = n;
  p.k = k;
  p.lda = lb.ld;
  p.ldb = la.ld;
  p.ldc = m;
  p.stride_a = plan.stride_b;
  p.stride_b = plan.stride_a;
  p.stride_c = plan.stride_c;
  for (const auto& start : plan.starts) {
    // cuBLAS counts batches in an int.
    for (int64_t done = 0; done < plan.count; done += p.count) {
      p.count = std::min<int64_t>(plan.count - done, INT_MAX);
      gemm(p, at(b, start[1] + done * plan.stride_b), at(a, start[0] + done * plan.stride_a),
           const_cast<char*>(at(out, start[2] + done * plan.stride_c)), scales, device, stream,
           op);
    }
  }
}

void integer_product(const Tensor& out, const Tensor& a, const Tensor& b, const Shape& batch,
                     bool use_self, const Scalar& beta, const Scalar& alpha, cudaStream_t stream,
                     const char* op) {
  const int64_t n = out.size(-2), m = out.size(-1), k = a.size(-1);
  const BatchPlan plan = plan_for(a, b, batch, n, m, k);
  IntegerGemm g{};
  g.dtype = out.dtype();
  g.n = n;
  g.m = m;
  g.k = k;
  g.a_row = a.stride(-2);
  g.a_col = a.stride(-1);
  g.a_batch = plan.stride_a;
  g.b_row = b.stride(-2);
  g.b_col = b.stride(-1);
  g.b_batch = plan.stride_b;
  g.c_batch = plan.stride_c;
  g.batches = plan.count;
  g.use_self = use_self;
  g.alpha = alpha.to_int64();
  g.beta = use_self ? beta.to_int64() : 0;
  for (const auto& start : plan.starts) {
    g.a = at(a, start[0]);
    g.b = at(b, start[1]);
    g.c = const_cast<char*>(at(out, start[2]));
    launch_integer_gemm(g, stream, op);
  }
}

}  // namespace

void matrix_product(const Tensor& out, Tensor a, Tensor b, const Shape& batch, bool use_self,
                    const Scalar& beta, const Scalar& alpha, const char* op) {
  const int device = out.device().index();
  DeviceGuard guard(device);
  if (a.size(-1) == 0) {  // no products: beta * self, or zeros, whatever alpha is
    Tensor result = out;
    if (use_self) {
      result.mul_(beta);
    } else {
      result.fill_(0);
    }
    return;
  }
  const cudaStream_t stream = current_stream(device);
  if (is_floating_point(out.dtype())) {
    float_product(out, std::move(a), std::move(b), batch, use_self, beta, alpha, device, stream,
                  op);
  } else {
    integer_product(out, a, b, batch, use_self, beta, alpha, stream, op);
  }
}

void dot_product(const Tensor& out, const Tensor& a, const Tensor& b, const char* op) {
  const int device = out.device().index();
  DeviceGuard guard(device);
  DotProduct d{};
  d.dtype = a.dtype();
  d.n = a.numel();
  d.blocks = dot_blocks(d.n);
  // One 8-byte partial sum per block. Freed on return while the kernels may still
  // run: the caching allocator reuses it only for later work on this stream.
  const Tensor partials = Tensor::empty({d.blocks}, kInt64, out.device());
  d.a = a.data_ptr();
  d.a_stride = a.stride(0);
  d.b = b.data_ptr();
  d.b_stride = b.stride(0);
  d.out = out.data_ptr();
  d.partials = partials.data_ptr();
  launch_dot(d, current_stream(device), op);
}

}  // namespace thd::cuda
