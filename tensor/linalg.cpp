// Matrix products: matmul, mm, bmm, addmm, dot, outer.
//
// float32/float64 products run in CBLAS on the operands' own memory: a matrix whose
// strides make it row-major or column-major with a leading dimension BLAS accepts is
// passed as it is (column-major as CblasTrans), and only layouts BLAS cannot express
// (rows expanded with stride 0, no unit stride in either dim) are copied. The output
// is fresh and GEMM writes it with beta = 0, so there is no zero-fill pass; matrix-
// vector shapes go to GEMV. The 16-bit floats compute in float32 and round once at
// the end. Integers use an i-k-j loop whose arithmetic is done in unsigned types, so
// overflow wraps like two's complement (as in torch) instead of being undefined.
//
// CUDA tensors take the same checks here and run in tensor/cuda/matmul.h (cuBLAS for
// the floats, thd's kernels for integers and dot); every op first checks that its
// operands share one device.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <type_traits>
#include <vector>

#include <thd/config.h>

#include "tensor/check.h"
#include "tensor/dispatch.h"
#include "tensor/into_elementwise.h"
#include "tensor/into_linalg.h"
#include "tensor/op_util.h"
#include "tensor/parallel.h"
#include "tensor/shape_util.h"
#if THD_WITH_CUDA
#include "tensor/cuda/matmul.h"
#endif

namespace thd {

using namespace detail;

namespace {

// OpenBLAS runs a GEMM of at most this many multiply-adds on the calling thread
// (SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD in its interface/gemm.c). Batches
// that small are spread over our pool instead; bigger ones are left to BLAS's threads,
// so the two pools never run at once.
constexpr int64_t kBlasSingleThreadWork = 65536 * 4;
// Multiply-adds one pool chunk of small GEMMs should hold to be worth a wake-up.
constexpr int64_t kGemmChunkWork = 1 << 18;

// Unsigned accumulator at least as wide as T: unsigned overflow is defined and its low
// bits are what two's complement arithmetic gives, which is all that gets stored.
template <typename T>
using wrap_t = std::conditional_t<sizeof(T) <= sizeof(uint32_t), uint32_t, uint64_t>;

void check_operand_dtypes(const Tensor& a, const Tensor& b, const char* op) {
  THD_CHECK(a.dtype() == b.dtype(), TypeError, op,
            "expected m1 and m2 to have the same dtype, but got: {} != {}", a.dtype(),
            b.dtype());
  THD_CHECK(a.dtype() != kBool, TypeError, op,
            "bool tensors are not supported (shapes {} and {}); convert them first, e.g. "
            "with .to(kInt64)",
            shape_str(a.shape()), shape_str(b.shape()));
}

// How BLAS can read a [rows, cols] matrix with strides (s0, s1), rows, cols >= 1.
struct BlasMatrix {
  bool ok = false;
  bool trans = false;  // stored column-major: BLAS sees its transpose, row-major
  int ld = 0;
};

BlasMatrix blas_matrix(int64_t rows, int64_t cols, int64_t s0, int64_t s1) {
  // The stride of a size-1 dim is never followed, so any valid leading dim will do.
  if ((cols == 1 || s1 == 1) && (rows == 1 || (s0 >= cols && s0 <= INT_MAX))) {
    return {true, false, static_cast<int>(rows == 1 ? cols : s0)};
  }
  if ((rows == 1 || s0 == 1) && (cols == 1 || (s1 >= rows && s1 <= INT_MAX))) {
    return {true, true, static_cast<int>(cols == 1 ? rows : s1)};
  }
  return {};
}

// Element offsets of every batch's matrix in x, which has `batch` as its leading dims
// (broadcast ones with stride 0), in row-major order of the batch index.
std::vector<int64_t> batch_offsets(const Tensor& x, const Shape& batch) {
  int64_t count = 1;
  for (int64_t s : batch) count *= s;
  std::vector<int64_t> off(static_cast<size_t>(count));
  std::vector<int64_t> idx(batch.size(), 0);
  int64_t cur = 0;
  for (int64_t t = 0; t < count; ++t) {
    off[t] = cur;
    for (size_t d = batch.size(); d-- > 0;) {
      cur += x.strides()[d];
      if (++idx[d] < batch[d]) break;
      cur -= idx[d] * x.strides()[d];
      idx[d] = 0;
    }
  }
  return off;
}

Shape with_matrix(Shape batch, int64_t rows, int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

template <typename T>
void gemm(const BlasMatrix& a, const BlasMatrix& b, int n, int m, int k, T alpha, const T* pa,
          const T* pb, T beta, T* pc) {
  const CBLAS_TRANSPOSE ta = a.trans ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = b.trans ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, n, m, k, alpha, pa, a.ld, pb, b.ld, beta, pc, m);
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, n, m, k, alpha, pa, a.ld, pb, b.ld, beta, pc, m);
  }
}

// y = alpha * op(A) x + beta * y for A stored row-major as rows x cols.
template <typename T>
void gemv(bool trans, int rows, int cols, T alpha, const T* a, int lda, const T* x, int incx,
          T beta, T* y) {
  const CBLAS_TRANSPOSE t = trans ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemv(CblasRowMajor, t, rows, cols, alpha, a, lda, x, incx, beta, y, 1);
  } else {
    cblas_dgemv(CblasRowMajor, t, rows, cols, alpha, a, lda, x, incx, beta, y, 1);
  }
}

// One [n, k] @ [k, m] product into contiguous c: alpha * a @ b + beta * c.
template <typename T>
void matrix_product(const BlasMatrix& la, const BlasMatrix& lb, int n, int m, int k, T alpha,
                    const T* pa, const T* pb, T beta, T* pc) {
  if (m != 1 && n != 1) {
    gemm<T>(la, lb, n, m, k, alpha, pa, pb, beta, pc);
    return;
  }
  // Matrix-vector products are memory-bound; gemv runs them several times faster than
  // gemm, which packs its operands first. BLAS may compute beta * y even for beta = 0
  // (0 * NaN), so a y that must be ignored is zeroed first: O(n), against O(n * k).
  if (beta == T(0)) std::fill(pc, pc + (m == 1 ? n : m), T(0));
  if (m == 1) {  // c[n] = A b, b one column of element stride ld
    const int incx = lb.trans ? 1 : lb.ld;
    if (la.trans) {
      gemv<T>(true, k, n, alpha, pa, la.ld, pb, incx, beta, pc);
    } else {
      gemv<T>(false, n, k, alpha, pa, la.ld, pb, incx, beta, pc);
    }
  } else {  // c[m] = B^T a, a one row
    const int incx = la.trans ? la.ld : 1;
    if (lb.trans) {
      gemv<T>(false, m, k, alpha, pb, lb.ld, pa, incx, beta, pc);
    } else {
      gemv<T>(true, k, m, alpha, pb, lb.ld, pa, incx, beta, pc);
    }
  }
}

// out (contiguous batch + [n, m], numel > 0) = alpha * a @ b, plus beta * out when
// use_self (out then holds self already).
template <typename T>
void blas_product(const Tensor& out, Tensor a, Tensor b, const Shape& batch, bool use_self,
                  const Scalar& beta_s, const Scalar& alpha_s, const char* op) {
  const int64_t n = out.size(-2), m = out.size(-1), k = a.size(-1);
  const T alpha = static_cast<T>(alpha_s.to_double());
  const T beta = use_self ? static_cast<T>(beta_s.to_double()) : T(0);
  T* c = out.data<T>();
  if (k == 0) {  // no products: beta * self, or zeros, whatever alpha is
    parallel_for(0, out.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) c[i] = use_self ? beta * c[i] : T(0);
    });
    return;
  }
  THD_CHECK(n <= INT_MAX && m <= INT_MAX && k <= INT_MAX, ValueError, op,
            "matrix sizes {}x{} and {}x{} exceed BLAS's 32-bit index range", n, k, k, m);
  BlasMatrix la = blas_matrix(n, k, a.stride(-2), a.stride(-1));
  if (!la.ok) {
    a = a.contiguous();
    la = blas_matrix(n, k, a.stride(-2), a.stride(-1));
  }
  BlasMatrix lb = blas_matrix(k, m, b.stride(-2), b.stride(-1));
  if (!lb.ok) {
    b = b.contiguous();
    lb = blas_matrix(k, m, b.stride(-2), b.stride(-1));
  }
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  const int64_t batches = out.numel() / (n * m);
  if (batches == 1) {
    matrix_product<T>(la, lb, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), alpha,
                      pa, pb, beta, c);
    return;
  }
  const std::vector<int64_t> aoff = batch_offsets(a.expand(with_matrix(batch, n, k)), batch);
  const std::vector<int64_t> boff = batch_offsets(b.expand(with_matrix(batch, k, m)), batch);
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      matrix_product<T>(la, lb, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                        alpha, pa + aoff[t], pb + boff[t], beta, c + t * n * m);
    }
  };
  const int64_t work = n * m * k;
  if (work <= kBlasSingleThreadWork) {
    parallel_for(0, batches, std::max<int64_t>(1, kGemmChunkWork / work), run);
  } else {
    run(0, batches);
  }
}

// Integer counterpart of blas_product: i-k-j order, so the innermost loop runs along
// contiguous rows of b and out, parallel over the rows of all batches.
template <typename T>
void integer_product(const Tensor& out, const Tensor& a, Tensor b, const Shape& batch,
                     bool use_self, const Scalar& beta_s, const Scalar& alpha_s) {
  using W = wrap_t<T>;
  const int64_t n = out.size(-2), m = out.size(-1), k = a.size(-1);
  if (m > 1 && b.stride(-1) != 1) b = b.contiguous();
  const std::vector<int64_t> aoff = batch_offsets(a.expand(with_matrix(batch, n, k)), batch);
  const std::vector<int64_t> boff = batch_offsets(b.expand(with_matrix(batch, k, m)), batch);
  const W alpha = static_cast<W>(alpha_s.to_int64());
  const W beta = static_cast<W>(beta_s.to_int64());
  const int64_t sa0 = a.stride(-2), sa1 = a.stride(-1), sb0 = b.stride(-2);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* c = out.data<T>();
  const int64_t rows = out.numel() / m;
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, k * m));
  parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<W> acc(static_cast<size_t>(m));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t t = r / n, i = r % n;
      const T* arow = pa + aoff[t] + i * sa0;
      const T* bmat = pb + boff[t];
      std::fill(acc.begin(), acc.end(), W(0));
      for (int64_t p = 0; p < k; ++p) {
        const W av = static_cast<W>(arow[p * sa1]);
        const T* brow = bmat + p * sb0;
        for (int64_t j = 0; j < m; ++j) acc[j] += av * static_cast<W>(brow[j]);
      }
      T* crow = c + r * m;
      for (int64_t j = 0; j < m; ++j) {
        const W self = use_self ? beta * static_cast<W>(crow[j]) : W(0);
        crow[j] = static_cast<T>(self + alpha * acc[j]);
      }
    }
  });
}

// beta * self + alpha * (a @ b) for a [..., n, k] and b [..., k, m] whose batch dims
// broadcast to `batch`, as a new contiguous tensor of batch + [n, m], or written into
// *into (tensor/into_linalg.h) when that is contiguous of that shape and dtype and
// shares no storage with an operand (an undefined tensor when it is not: nothing was
// written). self may be undefined; it is ignored (NaNs included) when beta is 0, as
// BLAS does. The caller has validated shapes and dtypes.
Tensor product(const Tensor& a, const Tensor& b, const Shape& batch, const Tensor& self,
               const Scalar& beta, const Scalar& alpha, const char* op, const Tensor* into = nullptr) {
  const DType dt = a.dtype();
  const bool use_self = self.defined() && beta.to_double() != 0;
  const Shape shape = with_matrix(batch, a.size(-2), b.size(-1));
  if (into != nullptr) {
    const bool reduced = dt == kFloat16 || dt == kBFloat16;
    if ((reduced && a.device().is_cpu()) || !writable_result(*into, shape, dt, a.device(), {&a, &b, &self})) {
      return Tensor();
    }
  }
  auto output = [&] { return into != nullptr ? *into : Tensor::empty(shape, dt, a.device()); };
#if THD_WITH_CUDA
  if (a.device().is_cuda()) {
    // 16-bit floats stay 16-bit: cuBLAS accumulates in float32 and rounds once, which
    // is what the CPU's detour through float32 below does.
    Tensor out = output();
    if (out.numel() == 0) return out;
    if (use_self) out.copy_(self);
    cuda::matrix_product(out, a, b, batch, use_self, beta, alpha, op);
    return out;
  }
#endif
  check_cpu_kernel(op, a);
  if (dt == kFloat16 || dt == kBFloat16) {
    Tensor r = product(a.to(kFloat32), b.to(kFloat32), batch,
                       use_self ? self.to(kFloat32) : Tensor(), beta, alpha, op);
    return r.to(dt);
  }
  Tensor out = output();
  if (out.numel() == 0) return out;
  // BLAS writes the output itself: with beta = 0 it never reads it, and addmm's
  // self is copied in first for beta * self.
  if (use_self) out.copy_(self);
  dispatch<kNumericSet>(dt, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      blas_product<T>(out, a, b, batch, use_self, beta, alpha, op);
    } else if constexpr (std::is_integral_v<T>) {
      integer_product<T>(out, a, b, batch, use_self, beta, alpha);
    }
  });
  return out;
}

// Broadcast of the batch dims (all but the last two) of a2 and b2; a and b are the
// operands as the user gave them, for the message.
Shape matmul_batch(const Tensor& a2, const Tensor& b2, const Tensor& a, const Tensor& b) {
  const Shape ba(a2.shape().begin(), a2.shape().end() - 2);
  const Shape bb(b2.shape().begin(), b2.shape().end() - 2);
  const size_t nd = std::max(ba.size(), bb.size());
  Shape out(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t da = i < nd - ba.size() ? 1 : ba[i - (nd - ba.size())];
    const int64_t db = i < nd - bb.size() ? 1 : bb[i - (nd - bb.size())];
    THD_CHECK(da == db || da == 1 || db == 1, ShapeError, "matmul",
              "batch dims {} of shape {} and {} of shape {} do not broadcast", shape_str(ba),
              shape_str(a.shape()), shape_str(bb), shape_str(b.shape()));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

template <typename T, typename Acc>
Acc dot_loop(const T* a, int64_t sa, const T* b, int64_t sb, int64_t n) {
  Acc acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<Acc>(a[i * sa]) * static_cast<Acc>(b[i * sb]);
  return acc;
}

bool blas_vector_ok(int64_t n, int64_t stride) {
  return n <= INT_MAX && (n <= 1 || (stride >= 1 && stride <= INT_MAX));
}

// a and b: 1-D, same dtype and length (checked by the caller). Into a new tensor, or
// into *into (tensor/into_linalg.h) when that can be the result on the CPU: an
// undefined tensor, with nothing written, when it cannot.
Tensor dot_product(const Tensor& a, const Tensor& b, const char* op, const Tensor* into) {
  if (into != nullptr && (!a.device().is_cpu() || !writable_result(*into, {}, a.dtype(), a.device(), {&a, &b}))) {
    return Tensor();
  }
#if THD_WITH_CUDA
  if (a.device().is_cuda()) {
    Tensor out = Tensor::empty({}, a.dtype(), a.device());
    cuda::dot_product(out, a, b, op);
    return out;
  }
#endif
  check_cpu_kernel(op, a);
  const int64_t n = a.numel();
  const int64_t sa = a.stride(0), sb = b.stride(0);
  Tensor out = into != nullptr ? *into : Tensor::empty({}, a.dtype());
  dispatch<kNumericSet>(a.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T r;
    if constexpr (std::is_floating_point_v<T>) {
      if (blas_vector_ok(n, sa) && blas_vector_ok(n, sb)) {
        const int n32 = static_cast<int>(n);
        const int ia = n <= 1 ? 1 : static_cast<int>(sa), ib = n <= 1 ? 1 : static_cast<int>(sb);
        // dsdot accumulates float32 products in double.
        if constexpr (std::is_same_v<T, float>) {
          r = static_cast<float>(cblas_dsdot(n32, pa, ia, pb, ib));
        } else {
          r = cblas_ddot(n32, pa, ia, pb, ib);
        }
      } else {
        r = static_cast<T>(dot_loop<T, double>(pa, sa, pb, sb, n));
      }
    } else if constexpr (is_reduced_float_v<T>) {
      r = T(static_cast<float>(dot_loop<T, double>(pa, sa, pb, sb, n)));
    } else {
      r = static_cast<T>(dot_loop<T, wrap_t<T>>(pa, sa, pb, sb, n));
    }
    *out.data<T>() = r;
  });
  return out;
}

void check_dot_args(const Tensor& a, const Tensor& b, const char* op) {
  THD_CHECK(a.dim() == 1 && b.dim() == 1, ShapeError, op,
            "1D tensors expected, but got {}D and {}D tensors (shapes {} and {})", a.dim(),
            b.dim(), shape_str(a.shape()), shape_str(b.shape()));
  THD_CHECK(a.dtype() == b.dtype(), TypeError, op,
            "expected both vectors to have the same dtype, but got: {} != {}", a.dtype(),
            b.dtype());
  THD_CHECK(a.dtype() != kBool, TypeError, op,
            "bool tensors are not supported; convert them first, e.g. with .to(kInt64)");
  THD_CHECK(a.numel() == b.numel(), ShapeError, op,
            "inconsistent tensor size: shapes {} and {} must have the same number of elements",
            shape_str(a.shape()), shape_str(b.shape()));
}

Tensor matmul_impl(const Tensor& self, const Tensor& other, const Tensor* into) {
  const char* op = "matmul";
  check_data(self, op, "self");
  check_data(other, op, "other");
  check_same_device(op, {&self, &other});
  THD_CHECK(self.dim() >= 1 && other.dim() >= 1, ShapeError, op,
            "both arguments to matmul need to be at least 1D, but they are {}D and {}D "
            "(shapes {} and {})",
            self.dim(), other.dim(), shape_str(self.shape()), shape_str(other.shape()));
  check_operand_dtypes(self, other, op);
  if (self.dim() == 1 && other.dim() == 1) {
    check_dot_args(self, other, op);
    return dot_product(self, other, op, into);
  }
  // A 1-D operand is a matrix with one row (first) or one column (second) whose extra
  // dim is removed from the result.
  const Tensor a = self.dim() == 1 ? self.unsqueeze(0) : self;
  const Tensor b = other.dim() == 1 ? other.unsqueeze(1) : other;
  const int64_t n = a.size(-2), k = a.size(-1), kb = b.size(-2), m = b.size(-1);
  THD_CHECK(k == kb, ShapeError, op, "shapes {} and {} cannot be multiplied ({}x{} and {}x{})",
            shape_str(self.shape()), shape_str(other.shape()), n, k, kb, m);
  const Shape batch = matmul_batch(a, b, self, other);
  Shape result_shape = batch;
  if (self.dim() > 1) result_shape.push_back(n);
  if (other.dim() > 1) result_shape.push_back(m);
  // The kept result is the product's output seen with the product's shape.
  if (into != nullptr && (!into->is_contiguous() || into->shape() != result_shape)) return Tensor();
  auto kept_as = [&](const Shape& shape) { return into->view(shape); };
  if (b.dim() == 2 && a.dim() > 2) {
    // [..., n, k] @ [k, m] is one [rows, k] @ [k, m] GEMM when a's leading dims fold.
    int64_t rows = 1;
    for (int64_t i = 0; i + 1 < a.dim(); ++i) rows *= a.shape()[i];
    if (auto st = view_strides(a.shape(), a.strides(), {rows, k})) {
      Tensor flat(a.storage(), a.dtype(), {rows, k}, std::move(*st), a.storage_offset());
      if (into != nullptr) {
        const Tensor out = kept_as({rows, m});
        return product(flat, b, {}, Tensor(), 0, 1, op, &out).defined() ? *into : Tensor();
      }
      return product(flat, b, {}, Tensor(), 0, 1, op).view(result_shape);
    }
  }
  if (into != nullptr) {
    const Tensor out = kept_as(with_matrix(batch, n, m));
    return product(a, b, batch, Tensor(), 0, 1, op, &out).defined() ? *into : Tensor();
  }
  return product(a, b, batch, Tensor(), 0, 1, op).view(result_shape);
}

Tensor mm_impl(const Tensor& self, const Tensor& other, const Tensor* into) {
  const char* op = "mm";
  check_data(self, op, "self");
  check_data(other, op, "mat2");
  check_same_device(op, {&self, &other});
  THD_CHECK(self.dim() == 2 && other.dim() == 2, ShapeError, op,
            "expected 2-D tensors, but got shapes {} and {} (matmul takes 1-D and batched "
            "operands)",
            shape_str(self.shape()), shape_str(other.shape()));
  check_operand_dtypes(self, other, op);
  THD_CHECK(self.shape()[1] == other.shape()[0], ShapeError, op,
            "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})", self.shape()[0], self.shape()[1],
            other.shape()[0], other.shape()[1]);
  return product(self, other, {}, Tensor(), 0, 1, op, into);
}

Tensor bmm_impl(const Tensor& self, const Tensor& other, const Tensor* into) {
  const char* op = "bmm";
  check_data(self, op, "self");
  check_data(other, op, "mat2");
  check_same_device(op, {&self, &other});
  THD_CHECK(self.dim() == 3 && other.dim() == 3, ShapeError, op,
            "expected 3-D tensors, but got shapes {} and {}", shape_str(self.shape()),
            shape_str(other.shape()));
  check_operand_dtypes(self, other, op);
  THD_CHECK(self.shape()[0] == other.shape()[0] && self.shape()[2] == other.shape()[1], ShapeError, op,
            "batch1 and batch2 shapes cannot be multiplied ({} and {}): expected batch2 of "
            "shape [{}, {}, *]",
            shape_str(self.shape()), shape_str(other.shape()), self.shape()[0], self.shape()[2]);
  return product(self, other, {self.shape()[0]}, Tensor(), 0, 1, op, into);
}

Tensor addmm_impl(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                  const Scalar& alpha, const Tensor* into) {
  const char* op = "addmm";
  check_data(self, op, "self");
  check_data(mat1, op, "mat1");
  check_data(mat2, op, "mat2");
  check_same_device(op, {&self, &mat1, &mat2});
  THD_CHECK(mat1.dim() == 2 && mat2.dim() == 2, ShapeError, op,
            "mat1 and mat2 must be 2-D, but got shapes {} and {}", shape_str(mat1.shape()),
            shape_str(mat2.shape()));
  check_operand_dtypes(mat1, mat2, op);
  THD_CHECK(self.dtype() == mat1.dtype(), TypeError, op,
            "self and mat2 must have the same dtype, but got {} and {}", self.dtype(), mat2.dtype());
  const int64_t n = mat1.size(0), k = mat1.size(1), m = mat2.size(1);
  THD_CHECK(k == mat2.size(0), ShapeError, op,
            "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})", n, k, mat2.size(0), m);
  const Shape result{n, m};
  bool fits = self.dim() <= 2;
  for (int64_t i = 0; fits && i < self.dim(); ++i) {
    const int64_t want = result[2 - self.dim() + i];
    fits = self.shape()[i] == want || self.shape()[i] == 1;
  }
  THD_CHECK(fits, ShapeError, op, "self of shape {} does not broadcast to the result's shape {}",
            shape_str(self.shape()), shape_str(result));
  if (!is_floating_point(self.dtype())) {
    THD_CHECK(!beta.is_floating_point() && !alpha.is_floating_point(), TypeError, op,
              "for integral input tensors, beta ({}) and alpha ({}) must not be floating "
              "point numbers",
              beta.to_double(), alpha.to_double());
  }
  return product(mat1, mat2, {}, self, beta, alpha, op, into);
}

Tensor dot_impl(const Tensor& self, const Tensor& other, const Tensor* into) {
  check_data(self, "dot", "self");
  check_data(other, "dot", "other");
  check_same_device("dot", {&self, &other});
  check_dot_args(self, other, "dot");
  return dot_product(self, other, "dot", into);
}

// Into a new tensor, or into *into when that can be the result on the CPU: an
// undefined tensor, with nothing written, when it cannot.
Tensor outer_impl(const Tensor& self, const Tensor& other, const Tensor* into) {
  const char* op = "outer";
  check_data(self, op, "self");
  check_data(other, op, "vec2");
  check_same_device(op, {&self, &other});
  THD_CHECK(self.dim() == 1 && other.dim() == 1, ShapeError, op,
            "expected 1-D tensors, but got shapes {} and {}", shape_str(self.shape()),
            shape_str(other.shape()));
  // Elementwise products, so the operands promote like mul does (torch.outer).
  const DType dt = result_type(self, other);
  const int64_t n = self.numel(), m = other.numel();
  if (into != nullptr &&
      (!self.device().is_cpu() || !writable_result(*into, {n, m}, dt, self.device(), {&self, &other}))) {
    return Tensor();
  }
  if (!self.device().is_cpu()) {
    // mul's broadcasting kernel is outer's loop: a column times a row.
    return self.to(dt).unsqueeze(1).mul(other.to(dt).unsqueeze(0));
  }
  const Tensor a = self.to(dt);
  const Tensor b = other.to(dt).contiguous();
  Tensor out = into != nullptr ? *into : Tensor::empty({n, m}, dt);
  dispatch_all(dt, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    const int64_t sa = a.stride(0);
    T* c = out.data<T>();
    parallel_for(0, n, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, m)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t i = begin; i < end; ++i) {
                     const T x = pa[i * sa];
                     T* row = c + i * m;
                     for (int64_t j = 0; j < m; ++j) {
                       if constexpr (std::is_same_v<T, bool>) {
                         row[j] = x && pb[j];
                       } else if constexpr (std::is_integral_v<T>) {
                         row[j] = static_cast<T>(static_cast<wrap_t<T>>(x) *
                                                 static_cast<wrap_t<T>>(pb[j]));
                       } else {
                         using C = compute_t<T>;
                         row[j] = static_cast<T>(static_cast<C>(x) * static_cast<C>(pb[j]));
                       }
                     }
                   }
                 });
  });
  return out;
}

}  // namespace

Tensor Tensor::matmul(const Tensor& other) const { return matmul_impl(*this, other, nullptr); }

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_data(a, "matmul", "self");
  return a.matmul(b);
}

Tensor Tensor::mm(const Tensor& other) const { return mm_impl(*this, other, nullptr); }
Tensor Tensor::bmm(const Tensor& other) const { return bmm_impl(*this, other, nullptr); }

Tensor Tensor::addmm(const Tensor& mat1, const Tensor& mat2, Scalar beta, Scalar alpha) const {
  return addmm_impl(*this, mat1, mat2, beta, alpha, nullptr);
}

namespace detail {

bool matmul_into(IntoMatmul kind, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (!out.defined() || !a.defined() || !b.defined()) return false;
  switch (kind) {
    case IntoMatmul::Matmul: return matmul_impl(a, b, &out).defined();
    case IntoMatmul::Mm: return mm_impl(a, b, &out).defined();
    case IntoMatmul::Bmm: return bmm_impl(a, b, &out).defined();
    case IntoMatmul::Dot: return dot_impl(a, b, &out).defined();
    case IntoMatmul::Outer: return outer_impl(a, b, &out).defined();
  }
  return false;
}

bool addmm_into(const Tensor& out, const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                const Scalar& alpha) {
  if (!out.defined() || !self.defined() || !mat1.defined() || !mat2.defined()) return false;
  return addmm_impl(self, mat1, mat2, beta, alpha, &out).defined();
}

}  // namespace detail

Tensor Tensor::dot(const Tensor& other) const { return dot_impl(*this, other, nullptr); }
Tensor Tensor::outer(const Tensor& other) const { return outer_impl(*this, other, nullptr); }

}  // namespace thd
