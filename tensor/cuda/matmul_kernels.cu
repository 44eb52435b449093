// Integer GEMM and dot products (matmul_kernels.h). The integer GEMM is a plain
// shared-memory tiled kernel: integer products are rare, and correctness with any
// strides and wrapping arithmetic is what it is for. Floating GEMMs go to cuBLAS
// (matmul.cpp).
#include "tensor/cuda/matmul_kernels.h"

#include <algorithm>
#include <type_traits>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_types.cuh"

namespace thd::cuda {
namespace {

using thd::detail::kFloatingSet;
using thd::detail::kIntegerSet;

// Unsigned accumulator at least as wide as T, as on the CPU (linalg.cpp wrap_t):
// unsigned overflow is defined and keeps the low bits two's complement would.
template <typename T>
using wrap_t = std::conditional_t<sizeof(T) <= sizeof(uint32_t), uint32_t, uint64_t>;

constexpr int kTile = 16;
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridZ = 65535;
constexpr int64_t kMaxGridX = 2147483647;

template <typename T>
__global__ void integer_gemm_kernel(IntegerGemm g) {
  using W = wrap_t<T>;
  __shared__ W a_tile[kTile][kTile + 1];
  __shared__ W b_tile[kTile][kTile + 1];
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  T* c = static_cast<T*>(g.c);
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int64_t row_tiles = (g.n + kTile - 1) / kTile;
  const int64_t col_tiles = (g.m + kTile - 1) / kTile;
  const W alpha = static_cast<W>(g.alpha);
  const W beta = static_cast<W>(g.beta);
  // Grid-stride over batches and tiles: every bound is uniform across the block, so
  // all its threads reach each __syncthreads.
  for (int64_t batch = blockIdx.z; batch < g.batches; batch += gridDim.z) {
    const T* ab = a + batch * g.a_batch;
    const T* bb = b + batch * g.b_batch;
    for (int64_t rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
      for (int64_t ct = blockIdx.x; ct < col_tiles; ct += gridDim.x) {
        const int64_t row = rt * kTile + ty;
        const int64_t col = ct * kTile + tx;
        W acc = 0;
        for (int64_t k0 = 0; k0 < g.k; k0 += kTile) {
          const int64_t ka = k0 + tx;
          const int64_t kb = k0 + ty;
          a_tile[ty][tx] =
              row < g.n && ka < g.k ? static_cast<W>(ab[row * g.a_row + ka * g.a_col]) : W(0);
          b_tile[ty][tx] =
              kb < g.k && col < g.m ? static_cast<W>(bb[kb * g.b_row + col * g.b_col]) : W(0);
          __syncthreads();
#pragma unroll
          for (int p = 0; p < kTile; ++p) acc += a_tile[ty][p] * b_tile[p][tx];
          __syncthreads();
        }
        if (row < g.n && col < g.m) {
          T* out = c + batch * g.c_batch + row * g.m + col;
          const W self = g.use_self ? beta * static_cast<W>(*out) : W(0);
          *out = static_cast<T>(self + alpha * acc);
        }
      }
    }
  }
}

constexpr int kDotThreads = 256;

// What a dot product accumulates in: double for every float (the CPU's dsdot /
// double loop), the wrapping unsigned type for integers.
template <typename T>
using dot_acc_t = std::conditional_t<is_float_v<T>, double, wrap_t<T>>;

template <typename T>
__device__ dot_acc_t<T> widen(T v) {
  if constexpr (is_float_v<T>) {
    return static_cast<double>(to_compute(v));
  } else {
    return static_cast<wrap_t<T>>(v);
  }
}

// The CPU's rounding of the accumulated value: once to float for the 16-bit floats
// (then to 16 bits), once to T otherwise.
template <typename T>
__device__ T narrow(dot_acc_t<T> v) {
  if constexpr (is_reduced_float_v<T>) {
    return convert<T>(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Sum over the block (blockDim.x == kDotThreads); the result in every thread.
template <typename Acc>
__device__ Acc block_sum(Acc v) {
  __shared__ Acc shared[kDotThreads];
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kDotThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  return shared[0];
}

template <typename T>
__global__ void dot_partial_kernel(DotProduct d) {
  using Acc = dot_acc_t<T>;
  const T* a = static_cast<const T*>(d.a);
  const T* b = static_cast<const T*>(d.b);
  Acc acc = 0;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < d.n;
       i += step) {
    acc += widen(a[i * d.a_stride]) * widen(b[i * d.b_stride]);
  }
  const Acc total = block_sum(acc);
  if (threadIdx.x == 0) static_cast<Acc*>(d.partials)[blockIdx.x] = total;
}

template <typename T>
__global__ void dot_final_kernel(DotProduct d) {
  using Acc = dot_acc_t<T>;
  const Acc* partials = static_cast<const Acc*>(d.partials);
  Acc acc = 0;
  for (int i = static_cast<int>(threadIdx.x); i < d.blocks; i += kDotThreads) acc += partials[i];
  const Acc total = block_sum(acc);
  if (threadIdx.x == 0) *static_cast<T*>(d.out) = narrow<T>(total);
}

}  // namespace

void launch_integer_gemm(const IntegerGemm& g, cudaStream_t stream, const char* op) {
  dispatch<kIntegerSet>(g.dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t row_tiles = (g.n + kTile - 1) / kTile;
    const int64_t col_tiles = (g.m + kTile - 1) / kTile;
    const dim3 grid(static_cast<unsigned>(std::clamp<int64_t>(col_tiles, 1, kMaxGridX)),
                    static_cast<unsigned>(std::clamp<int64_t>(row_tiles, 1, kMaxGridY)),
                    static_cast<unsigned>(std::clamp<int64_t>(g.batches, 1, kMaxGridZ)));
    integer_gemm_kernel<T><<<grid, dim3(kTile, kTile), 0, stream>>>(g);
    THD_CUDA_CHECK_LAUNCH(op);
  });
}

int dot_blocks(int64_t n) {
  // Eight elements per thread at least, so small vectors use few blocks.
  const int64_t per_block = int64_t{kDotThreads} * 8;
  return static_cast<int>(std::clamp<int64_t>((n + per_block - 1) / per_block, 1, kDotMaxBlocks));
}

void launch_dot(const DotProduct& d, cudaStream_t stream, const char* op) {
  dispatch<kIntegerSet | kFloatingSet>(d.dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    static_assert(sizeof(dot_acc_t<T>) <= 8, "partials hold 8 bytes each");
    dot_partial_kernel<T><<<d.blocks, kDotThreads, 0, stream>>>(d);
    THD_CUDA_CHECK_LAUNCH(op);
    dot_final_kernel<T><<<1, kDotThreads, 0, stream>>>(d);
    THD_CUDA_CHECK_LAUNCH(op);
  });
}

}  // namespace thd::cuda
