// softmax and log_softmax of CUDA tensors. The input is read as contiguous
// [outer, n, inner] with the dim in the middle; each of the outer * inner columns
// (stride inner) is normalised on its own:
// - a running (max, sum of exp(x - max)) per thread, rescaled when the max grows,
//   combined across threads (the online softmax), then one pass that writes;
// - inner == 1 (the dim is innermost): groups of threads per row, as the row
//   reductions; otherwise threads along x take neighbouring columns and threads
//   along y share the dim;
// - few long columns are split over several blocks: a first launch writes partial
//   (max, sum) pairs, a second combines a column's pairs and writes its chunk.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <thd/tensor.h>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/cuda_stream.h"
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/reduce_pack.cuh"
#include "tensor/cuda/reduce_block.cuh"
#include "tensor/cuda/reduce_plan.h"
#include "tensor/cuda/softmax.h"

namespace thd::cuda {

namespace {

using reduce_detail::block_reduce;
using reduce_detail::load_pack;
using reduce_detail::Pack;
using reduce_detail::segment_broadcast;
using reduce_detail::segment_reduce;
using reduce_detail::store_pack;
using thd::detail::kFloatingSet;

constexpr int kMaxRowBlock = 1024;
constexpr int kColumnBlock = 256;

// What a launch does: everything (one block group per column), or a split column's
// first half (partial pairs) or second half (combine them, write).
enum Phase : int { kWhole, kStats, kWrite };

// The sum of exponentials: float for 16-bit floats, double for float32 and float64
// (as the CPU sums in double).
template <typename T>
using sum_t = std::conditional_t<is_reduced_float_v<T>, float, double>;

template <typename C, typename S>
struct MaxSum {
  C m;  // the largest element seen (NaN once one is)
  S s;  // sum of exp(x - m) over the elements seen; 0 when only -inf was
};

template <typename C>
__device__ __forceinline__ C exp_of(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return expf(x);
  } else {
    return exp(x);
  }
}

template <typename S>
__device__ __forceinline__ S log_of(S x) {
  if constexpr (std::is_same_v<S, float>) {
    return logf(x);
  } else {
    return log(x);
  }
}

// The online softmax statistics. NaN, +inf and all--inf columns come out as the
// CPU's three passes give them: a NaN max or a NaN sum, so every output is NaN.
template <typename C, typename S>
struct MaxSumOp {
  using A = MaxSum<C, S>;
  static constexpr C kNegInf = -std::numeric_limits<C>::infinity();

  __device__ static C nan_max(C m, C x) { return (x > m || x != x) ? x : m; }
  // a's sum taken relative to max m (>= a.m); a sum of nothing stays 0 even when
  // both maxima are -inf.
  __device__ static S rescale(const A& a, C m) {
    return a.s == S(0) ? S(0) : a.s * static_cast<S>(exp_of(a.m - m));
  }
  __device__ A identity() const { return {kNegInf, S(0)}; }
  __device__ __forceinline__ A fold(const A& a, C x) const {
    const C m = nan_max(a.m, x);
    S s = m != a.m ? rescale(a, m) : a.s;
    if (x != kNegInf) s += static_cast<S>(exp_of(x - m));
    return {m, s};
  }
  __device__ __forceinline__ A combine(const A& a, const A& b) const {
    const C m = nan_max(a.m, b.m);
    return {m, rescale(a, m) + rescale(b, m)};
  }
};

// Writes elements [r0, r1) of a column (stride `stride`) taken by the thread at
// `first`, `step` apart, from the column's statistics.
template <typename T, typename C, typename S>
__device__ __forceinline__ void write_column(const T* x, T* y, int64_t stride, int64_t r0,
                                             int64_t r1, int64_t first, int64_t step,
                                             const MaxSum<C, S>& a, bool log) {
  if (log) {
    const auto ls = static_cast<C>(log_of(a.s));
    for (int64_t k = r0 + first; k < r1; k += step) {
      y[k * stride] = convert<T>(to_compute(x[k * stride]) - a.m - ls);
    }
  } else {
    const auto inv = static_cast<C>(S(1) / a.s);
    for (int64_t k = r0 + first; k < r1; k += step) {
      y[k * stride] = convert<T>(exp_of(to_compute(x[k * stride]) - a.m) * inv);
    }
  }
}

// Folds elements [r0, r1) of a column (stride `stride`) taken by the thread at
// `first`, `step` apart; four loads in flight.
template <typename T, typename Op>
__device__ __forceinline__ typename Op::A fold_column(const Op& op, typename Op::A a, const T* x,
                                                       int64_t stride, int64_t r0, int64_t r1,
                                                       int64_t first, int64_t step) {
  int64_t k = r0 + first;
  for (; k + 3 * step < r1; k += 4 * step) {
    const T x0 = x[k * stride];
    const T x1 = x[(k + step) * stride];
    const T x2 = x[(k + 2 * step) * stride];
    const T x3 = x[(k + 3 * step) * stride];
    a = op.fold(a, to_compute(x0));
    a = op.fold(a, to_compute(x1));
    a = op.fold(a, to_compute(x2));
    a = op.fold(a, to_compute(x3));
  }
  for (; k < r1; k += step) a = op.fold(a, to_compute(x[k * stride]));
  return a;
}

// The same over a contiguous, 16-byte aligned row whose r0 and r1 are whole vectors.
template <typename T, typename Op>
__device__ __forceinline__ typename Op::A fold_packs(const Op& op, typename Op::A a, const T* x,
                                                      int64_t r0, int64_t r1, int64_t first,
                                                      int64_t step) {
  constexpr int kVec = Pack<T>::kSize;
  const int64_t k1 = r1 / kVec;
  int64_t k = r0 / kVec + first;
  for (; k + 3 * step < k1; k += 4 * step) {
    Pack<T> p[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) p[u] = load_pack(x + (k + u * step) * kVec);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) a = op.fold(a, to_compute(p[u].v[j]));
    }
  }
  for (; k < k1; k += step) {
    const Pack<T> p = load_pack(x + k * kVec);
#pragma unroll
    for (int j = 0; j < kVec; ++j) a = op.fold(a, to_compute(p.v[j]));
  }
  return a;
}

// write_column over whole aligned vectors.
template <typename T, typename C, typename S>
__device__ __forceinline__ void write_packs(const T* x, T* y, int64_t r0, int64_t r1,
                                            int64_t first, int64_t step, const MaxSum<C, S>& a,
                                            bool log) {
  constexpr int kVec = Pack<T>::kSize;
  const C f = log ? static_cast<C>(log_of(a.s)) : static_cast<C>(S(1) / a.s);
  const int64_t k1 = r1 / kVec;
  for (int64_t k = r0 / kVec + first; k < k1; k += step) {
    const Pack<T> in = load_pack(x + k * kVec);
    Pack<T> out;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const C d = to_compute(in.v[j]) - a.m;
      out.v[j] = convert<T>(log ? d - f : exp_of(d) * f);
    }
    store_pack(y + k * kVec, out);
  }
}

// inner == 1: work item i = row (i / splits), chunk (i % splits); groups of c.group
// threads take items, the whole block when c.group > 32.
template <typename T>
__global__ void __launch_bounds__(kMaxRowBlock)
    softmax_rows_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t rows, int64_t n,
                        RowConfig c, int phase, bool log, bool vec,
                        MaxSum<compute_t<T>, sum_t<T>>* __restrict__ partial) {
  using A = MaxSum<compute_t<T>, sum_t<T>>;
  const MaxSumOp<compute_t<T>, sum_t<T>> op;
  __shared__ A shared_stats;
  const int g = c.group;
  const int groups = static_cast<int>(blockDim.x) / g;
  const int group = static_cast<int>(threadIdx.x) / g;
  const int lane = static_cast<int>(threadIdx.x) % g;
  const int64_t items = rows * c.splits;
  // `first` is the same for the whole block, so every thread runs every shuffle.
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * groups; first < items;
       first += static_cast<int64_t>(gridDim.x) * groups) {
    const int64_t item = first + group;
    const bool valid = item < items;
    const int64_t row = valid ? item / c.splits : 0;
    const int64_t r0 = (item - row * c.splits) * c.chunk;
    const int64_t r1 = min(n, r0 + c.chunk);
    const T* x = in + row * n;
    A a = op.identity();
    if (valid && phase == kWrite) {
      for (int64_t s = lane; s < c.splits; s += g) a = op.combine(a, partial[row * c.splits + s]);
    } else if (valid) {
      a = vec ? fold_packs(op, a, x, r0, r1, lane, g) : fold_column(op, a, x, 1, r0, r1, lane, g);
    }
    if (g <= 32) {
      a = segment_broadcast(segment_reduce(op, a, g), g);
    } else {
      a = block_reduce(op, a);
      if (threadIdx.x == 0) shared_stats = a;
      __syncthreads();
      a = shared_stats;  // rewritten only after the next block_reduce's barriers
    }
    if (!valid) continue;
    if (phase == kStats) {
      if (lane == 0) partial[item] = a;
    } else if (vec) {
      write_packs(x, out + row * n, r0, r1, lane, g, a, log);
    } else {
      write_column(x, out + row * n, 1, r0, r1, lane, g, a, log);
    }
  }
}

// inner > 1: column col = blockIdx.x * blockDim.x + threadIdx.x, chunk blockIdx.y of
// the dim, shared by the threads along y.
template <typename T>
__global__ void __launch_bounds__(kColumnBlock)
    softmax_columns_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t cols, int64_t n,
                           int64_t inner, ColumnConfig c, int phase, bool log,
                           MaxSum<compute_t<T>, sum_t<T>>* __restrict__ partial) {
  using A = MaxSum<compute_t<T>, sum_t<T>>;
  const MaxSumOp<compute_t<T>, sum_t<T>> op;
  __shared__ A slots[kColumnBlock];
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int bx = static_cast<int>(blockDim.x);
  const int by = static_cast<int>(blockDim.y);
  const int64_t col = static_cast<int64_t>(blockIdx.x) * bx + tx;
  const int64_t split = blockIdx.y;
  const bool valid = col < cols;
  const int64_t outer = col / inner;
  const int64_t base = outer * n * inner + (col - outer * inner);
  const int64_t r0 = split * c.chunk;
  const int64_t r1 = min(n, r0 + c.chunk);
  A a = op.identity();
  if (valid && phase == kWrite) {
    for (int64_t s = ty; s < c.splits; s += by) a = op.combine(a, partial[col * c.splits + s]);
  } else if (valid) {
    a = fold_column(op, a, in + base, inner, r0, r1, ty, by);
  }
  if (by > 1) {
    slots[ty * bx + tx] = a;
    __syncthreads();
    for (int h = by / 2; h > 0; h /= 2) {
      if (ty < h) {
        a = op.combine(a, slots[(ty + h) * bx + tx]);
        slots[ty * bx + tx] = a;
      }
      __syncthreads();
    }
    a = slots[tx];
  }
  if (!valid) return;
  if (phase == kStats) {
    if (ty == 0) partial[col * c.splits + split] = a;
  } else {
    write_column(in + base, out + base, inner, r0, r1, ty, by, a, log);
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Rows of n: about 32 elements per thread (several loads in flight, and more rows
// per SM than barriers would allow with more threads each), a block per row past a
// warp; long rows
// with too few of them to fill the GPU are split, in chunks of whole `vec`-element
// vectors.
RowConfig rows_config(int64_t rows, int64_t n, int64_t vec, int64_t sms) {
  RowConfig c;
  const int64_t lanes = std::max<int64_t>(1, ceil_div(n, 32));
  if (lanes <= 32) {
    c.group = static_cast<int>(next_pow2(lanes));
    c.block = 256;
  } else {
    c.group = static_cast<int>(std::min<int64_t>(kMaxRowBlock, next_pow2(lanes)));
    c.block = c.group;
  }
  const int64_t want_items = sms * 1024 / c.group;
  if (rows < want_items) {
    const int64_t max_splits = std::max<int64_t>(1, n / (c.group * 16));
    c.splits = std::min(ceil_div(want_items, rows), max_splits);
  }
  c.chunk = n;
  if (c.splits > 1) {
    c.chunk = ceil_div(ceil_div(n, c.splits), vec) * vec;
    c.splits = ceil_div(n, c.chunk);
  }
  const int64_t blocks = ceil_div(rows * c.splits, c.block / c.group);
  c.grid = static_cast<int>(std::clamp<int64_t>(blocks, 1, sms * 2048 / c.block * 4));
  return c;
}

template <typename T>
void launch_softmax(const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner,
                    bool log, const char* name) {
  using A = MaxSum<compute_t<T>, sum_t<T>>;
  const int device = out.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  const int64_t sms = multiprocessor_count(device);
  const T* src = static_cast<const T*>(x.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  const int64_t cols = outer * inner;
  // Rows read as 16-byte vectors when every row (and so every chunk) starts aligned.
  constexpr int64_t kVec = Pack<T>::kSize;
  const bool vec = inner == 1 && n % kVec == 0 &&
                   reinterpret_cast<uintptr_t>(src) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(dst) % 16 == 0;
  const RowConfig rc = inner == 1 ? rows_config(outer, n, vec ? kVec : 1, sms) : RowConfig{};
  const ColumnConfig cc = inner == 1 ? ColumnConfig{} : column_config(cols, n, sms);
  const int64_t splits = inner == 1 ? rc.splits : cc.splits;
  // The pairs of a split column live in a scratch tensor, reused by the caching
  // allocator only in this stream's order.
  Tensor scratch;
  A* partial = nullptr;
  if (splits > 1) {
    scratch = Tensor::empty({cols * splits * static_cast<int64_t>(sizeof(A))}, kUInt8,
                            out.device());
    partial = static_cast<A*>(scratch.data_ptr());
  }
  const int phases[2] = {splits > 1 ? kStats : kWhole, kWrite};
  for (int i = 0; i < (splits > 1 ? 2 : 1); ++i) {
    if (inner == 1) {
      softmax_rows_kernel<T><<<rc.grid, rc.block, 0, stream>>>(src, dst, outer, n, rc, phases[i],
                                                               log, vec, partial);
    } else {
      const dim3 grid(static_cast<unsigned>(cc.grid_x), static_cast<unsigned>(cc.splits));
      const dim3 block(static_cast<unsigned>(cc.block_x), static_cast<unsigned>(cc.block_y));
      softmax_columns_kernel<T><<<grid, block, 0, stream>>>(src, dst, cols, n, inner, cc,
                                                            phases[i], log, partial);
    }
    THD_CUDA_CHECK_LAUNCH(name);
  }
}

}  // namespace

Tensor softmax(const Tensor& self, int64_t dim, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  return dispatch<kFloatingSet>(self.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Tensor x = self.contiguous();
    Tensor out = Tensor::empty(self.shape(), self.dtype(), self.device());
    if (out.numel() == 0) return out;
    int64_t outer = 1, n = 1, inner = 1;
    for (int64_t i = 0; i < self.dim(); ++i) {
      (i < dim ? outer : i == dim ? n : inner) *= self.shape()[i];
    }
    launch_softmax<T>(x, out, outer, n, inner, log, name);
    return out;
  });
}

}  // namespace thd::cuda
