// The reduction kernels and their launch, generic over an Op of reduce_ops.cuh and
// laid out by reduce_plan.h:
// - rows: the reduced dim is innermost in memory. A group of threads (a warp slice or
//   a whole block) folds one output, or one chunk of it, with 16-byte vector loads
//   where the reduced dim is contiguous, and combines with warp shuffles.
// - columns: a kept dim is innermost. Threads along x take neighbouring outputs (so a
//   warp reads neighbouring memory), threads along y share the reduced dim and
//   combine through shared memory.
// When there are few long outputs, both split each over several blocks, which write
// partial accumulators; a second kernel combines each output's partials in order.
// Every combining order is fixed by the launch shape, so results are deterministic.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <thd/tensor.h>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/cuda_stream.h"
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/reduce_pack.cuh"
#include "tensor/cuda/reduce_block.cuh"
#include "tensor/cuda/reduce_ops.cuh"
#include "tensor/cuda/reduce_plan.h"

namespace thd::cuda::reduce_detail {

constexpr int kMaxRowBlock = 512;
constexpr int kColumnBlock = 256;
constexpr int kFinalizeBlock = 256;

// 64-bit division costs more than a short row's loads: one kept dim needs none.
__device__ __forceinline__ int64_t in_offset(const ReduceLayout& l, int64_t o) {
  if (l.inner_size >= l.n_out) return o * l.inner_in;
  const int64_t outer = o / l.inner_size;
  const int64_t inner = o - outer * l.inner_size;
  return outer * l.outer_in + inner * l.inner_in;
}

__device__ __forceinline__ int64_t out_offset(const ReduceLayout& l, int64_t o) {
  if (l.inner_size >= l.n_out) return o * l.inner_out;
  const int64_t outer = o / l.inner_size;
  const int64_t inner = o - outer * l.inner_size;
  return outer * l.outer_out + inner * l.inner_out;
}

template <typename Op>
__device__ __forceinline__ typename Op::acc_t fold_pack(const Op& op, typename Op::acc_t a,
                                                         const Pack<typename Op::in_t>& pk,
                                                         int64_t r) {
  if constexpr (requires { op.fold_pack(a, pk, r); }) {
    return op.fold_pack(a, pk, r);
  } else {
#pragma unroll
    for (int j = 0; j < Pack<typename Op::in_t>::kSize; ++j) a = op.fold(a, pk.v[j], r + j);
    return a;
  }
}

// Folds elements [r0, r1) of the row at `row` (stride `stride`) that belong to lane
// `lane` of a group of `g` threads into a.
template <typename Op>
__device__ __forceinline__ typename Op::acc_t fold_row(const Op& op, typename Op::acc_t a,
                                                        const typename Op::in_t* row,
                                                        int64_t stride, int64_t r0, int64_t r1,
                                                        int lane, int g) {
  using T = typename Op::in_t;
  constexpr int kVec = Pack<T>::kSize;
  if (stride == 1) {
    // Scalar head up to the first 16-byte boundary, vectors, scalar tail.
    const auto addr = reinterpret_cast<uintptr_t>(row + r0);
    const int64_t mis = static_cast<int64_t>((addr % 16) / sizeof(T));
    const int64_t head = min(r1 - r0, mis == 0 ? int64_t{0} : kVec - mis);
    for (int64_t h = lane; h < head; h += g) a = op.fold(a, row[r0 + h], r0 + h);
    const int64_t v0 = r0 + head;
    const int64_t nvec = (r1 - v0) / kVec;
    const T* base = row + v0;
    int64_t k = lane;
    // Four independent loads in flight per thread.
    for (; k + 3 * g < nvec; k += 4 * g) {
      const Pack<T> p0 = load_pack(base + k * kVec);
      const Pack<T> p1 = load_pack(base + (k + g) * kVec);
      const Pack<T> p2 = load_pack(base + (k + 2 * g) * kVec);
      const Pack<T> p3 = load_pack(base + (k + 3 * g) * kVec);
      a = fold_pack(op, a, p0, v0 + k * kVec);
      a = fold_pack(op, a, p1, v0 + (k + g) * kVec);
      a = fold_pack(op, a, p2, v0 + (k + 2 * g) * kVec);
      a = fold_pack(op, a, p3, v0 + (k + 3 * g) * kVec);
    }
    for (; k < nvec; k += g) a = fold_pack(op, a, load_pack(base + k * kVec), v0 + k * kVec);
    for (int64_t r = v0 + nvec * kVec + lane; r < r1; r += g) a = op.fold(a, row[r], r);
    return a;
  }
  int64_t r = r0 + lane;
  for (; r + 3 * g < r1; r += 4 * g) {
    const T x0 = row[r * stride];
    const T x1 = row[(r + g) * stride];
    const T x2 = row[(r + 2 * g) * stride];
    const T x3 = row[(r + 3 * g) * stride];
    a = op.fold(a, x0, r);
    a = op.fold(a, x1, r + g);
    a = op.fold(a, x2, r + 2 * g);
    a = op.fold(a, x3, r + 3 * g);
  }
  for (; r < r1; r += g) a = op.fold(a, row[r * stride], r);
  return a;
}

// Work item i = output (i / splits), chunk (i % splits). Groups of c.group threads
// take items; when c.group > 32 the group is the whole block.
// Two blocks of the largest size per SM: at most 64 registers a thread.
template <typename Op>
__global__ void __launch_bounds__(kMaxRowBlock, 2)
    reduce_rows_kernel(Op op, const typename Op::in_t* __restrict__ in, ReduceLayout l,
                       RowConfig c, typename Op::out_t* __restrict__ out,
                       typename Op::acc_t* __restrict__ partial) {
  using A = typename Op::acc_t;
  const int g = c.group;
  const int groups = static_cast<int>(blockDim.x) / g;
  const int group = static_cast<int>(threadIdx.x) / g;
  const int lane = static_cast<int>(threadIdx.x) % g;
  const int64_t items = l.n_out * c.splits;
  // `first` is the same for the whole block, so every thread runs every shuffle.
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * groups; first < items;
       first += static_cast<int64_t>(gridDim.x) * groups) {
    const int64_t item = first + group;
    const bool valid = item < items;
    A a = op.identity();
    int64_t o = 0;
    if (valid) {
      o = c.splits == 1 ? item : item / c.splits;
      const int64_t r0 = (item - o * c.splits) * c.chunk;
      const int64_t r1 = min(l.n_red, r0 + c.chunk);
      a = fold_row(op.at(out_offset(l, o)), a, in + in_offset(l, o), l.red_in, r0, r1, lane, g);
    }
    a = g <= 32 ? segment_reduce(op, a, g) : block_reduce(op, a);
    if (valid && lane == 0) {
      if (c.splits == 1) {
        out[out_offset(l, o)] = op.project(a);
      } else {
        partial[item] = a;
      }
    }
  }
}

// Output o = blockIdx.x * blockDim.x + threadIdx.x, chunk blockIdx.y of the reduced
// dim, shared by the threads along y.
template <typename Op>
__global__ void __launch_bounds__(kColumnBlock)
    reduce_columns_kernel(Op op, const typename Op::in_t* __restrict__ in, ReduceLayout l,
                          ColumnConfig c, typename Op::out_t* __restrict__ out,
                          typename Op::acc_t* __restrict__ partial) {
  using A = typename Op::acc_t;
  using T = typename Op::in_t;
  __shared__ alignas(16) unsigned char raw[kColumnBlock * sizeof(A)];
  A* slots = reinterpret_cast<A*>(raw);
  const int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t split = blockIdx.y;
  const bool valid = o < l.n_out;
  A a = op.identity();
  if (valid) {
    const Op rop = op.at(out_offset(l, o));
    const T* col = in + in_offset(l, o);
    const int64_t s = l.red_in;
    const int64_t step = blockDim.y;
    const int64_t r1 = min(l.n_red, (split + 1) * c.chunk);
    int64_t r = split * c.chunk + threadIdx.y;
    for (; r + 3 * step < r1; r += 4 * step) {
      const T x0 = col[r * s];
      const T x1 = col[(r + step) * s];
      const T x2 = col[(r + 2 * step) * s];
      const T x3 = col[(r + 3 * step) * s];
      a = rop.fold(a, x0, r);
      a = rop.fold(a, x1, r + step);
      a = rop.fold(a, x2, r + 2 * step);
      a = rop.fold(a, x3, r + 3 * step);
    }
    for (; r < r1; r += step) a = rop.fold(a, col[r * s], r);
  }
  if (blockDim.y > 1) {
    const int tx = static_cast<int>(threadIdx.x);
    const int ty = static_cast<int>(threadIdx.y);
    const int bx = static_cast<int>(blockDim.x);
    slots[ty * bx + tx] = a;
    __syncthreads();
    for (int h = static_cast<int>(blockDim.y) / 2; h > 0; h /= 2) {
      if (ty < h) {
        a = op.combine(a, slots[(ty + h) * bx + tx]);
        slots[ty * bx + tx] = a;
      }
      __syncthreads();
    }
  }
  if (valid && threadIdx.y == 0) {
    if (c.splits == 1) {
      out[out_offset(l, o)] = op.project(a);
    } else {
      partial[o * c.splits + split] = a;
    }
  }
}

// partial is [n_out][splits]: a warp per output combines its row and writes the result.
template <typename Op>
__global__ void __launch_bounds__(kFinalizeBlock)
    reduce_finalize_kernel(Op op, const typename Op::acc_t* __restrict__ partial,
                           int64_t splits, ReduceLayout l, typename Op::out_t* __restrict__ out) {
  using A = typename Op::acc_t;
  constexpr int kWarps = kFinalizeBlock / 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * kWarps; first < l.n_out;
       first += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t o = first + warp;
    if (o >= l.n_out) continue;  // the same for the whole warp
    A a = op.identity();
    for (int64_t s = lane; s < splits; s += 32) a = op.combine(a, partial[o * splits + s]);
    a = segment_reduce(op, a, 32);
    if (lane == 0) out[out_offset(l, o)] = op.project(a);
  }
}

// Runs op over plan, writing out (a contiguous CUDA tensor of op's out_t). Asynchronous
// on the current stream of out's device.
template <typename Op>
void run_reduce(const Op& op, const ReducePlan& plan, const Tensor& out, const char* name) {
  using T = typename Op::in_t;
  using A = typename Op::acc_t;
  using Out = typename Op::out_t;
  static_assert(std::is_trivially_copyable_v<A>);
  const ReduceLayout& l = plan.layout;
  if (l.n_out == 0) return;
  const int device = out.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  const T* in = static_cast<const T*>(plan.input.data_ptr());
  Out* dst = static_cast<Out*>(out.data_ptr());
  const int64_t splits = plan.rows ? plan.row.splits : plan.column.splits;
  // Partial accumulators live in a scratch tensor; the caching allocator hands its
  // memory out again only in this stream's order, after the kernels below.
  Tensor scratch;
  A* partial = nullptr;
  if (splits > 1) {
    scratch = Tensor::empty({l.n_out * splits * static_cast<int64_t>(sizeof(A))}, kUInt8,
                            out.device());
    partial = static_cast<A*>(scratch.data_ptr());
  }
  if (plan.rows) {
    const RowConfig& c = plan.row;
    reduce_rows_kernel<Op><<<c.grid, c.block, 0, stream>>>(op, in, l, c, dst, partial);
  } else {
    const ColumnConfig& c = plan.column;
    const dim3 grid(static_cast<unsigned>(c.grid_x), static_cast<unsigned>(c.splits));
    const dim3 block(static_cast<unsigned>(c.block_x), static_cast<unsigned>(c.block_y));
    reduce_columns_kernel<Op><<<grid, block, 0, stream>>>(op, in, l, c, dst, partial);
  }
  THD_CUDA_CHECK_LAUNCH(name);
  if (splits > 1) {
    constexpr int64_t kWarps = kFinalizeBlock / 32;
    const int64_t blocks = std::min<int64_t>((l.n_out + kWarps - 1) / kWarps, 65535);
    reduce_finalize_kernel<Op><<<static_cast<unsigned>(blocks), kFinalizeBlock, 0, stream>>>(
        op, partial, splits, l, dst);
    THD_CUDA_CHECK_LAUNCH(name);
  }
}

}  // namespace thd::cuda::reduce_detail
