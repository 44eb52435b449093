// Combining one value per thread across a warp segment or a block, for any
// trivially copyable accumulator and any Op with identity() and combine(a, b). Shared
// by the reductions and softmax.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace thd::cuda::reduce_detail {

// Shuffles any trivially copyable accumulator, one 32-bit word at a time.
template <typename A>
__device__ __forceinline__ A shfl_down(const A& v, int delta, int width) {
  constexpr int kWords = static_cast<int>((sizeof(A) + 3) / 4);
  uint32_t w[kWords] = {};
  memcpy(w, &v, sizeof(A));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_down_sync(0xffffffffu, w[i], delta, width);
  A r;
  memcpy(&r, w, sizeof(A));
  return r;
}

// Combines the values of each aligned segment of `width` lanes (a power of two <= 32)
// into the segment's first lane. Every lane of the warp must call it.
template <typename Op, typename A>
__device__ __forceinline__ A segment_reduce(const Op& op, A v, int width) {
  for (int off = width / 2; off > 0; off /= 2) v = op.combine(v, shfl_down(v, off, width));
  return v;
}

// Combines the values of a one-dimensional block (a multiple of 32 threads) into
// thread 0. Every thread of the block must call it.
template <typename Op, typename A>
__device__ A block_reduce(const Op& op, A v) {
  __shared__ alignas(16) unsigned char raw[32 * sizeof(A)];
  A* slots = reinterpret_cast<A*>(raw);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  v = segment_reduce(op, v, 32);
  __syncthreads();  // the slots may still be read by a previous call
  if (lane == 0) slots[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? slots[lane] : op.identity();
    v = segment_reduce(op, v, 32);
  }
  return v;
}

// Lane 0's value of each aligned segment of `width` lanes, to every lane of it.
template <typename A>
__device__ __forceinline__ A segment_broadcast(const A& v, int width) {
  constexpr int kWords = static_cast<int>((sizeof(A) + 3) / 4);
  uint32_t w[kWords] = {};
  memcpy(w, &v, sizeof(A));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_sync(0xffffffffu, w[i], 0, width);
  A r;
  memcpy(&r, w, sizeof(A));
  return r;
}

}  // namespace thd::cuda::reduce_detail
