// How the index-family kernels (gather, scatter, masked_fill, sort) walk strided
// tensors: a logical shape shared by N operands, each with its own element strides
// (0 where it broadcasts or is "restrided", see indexing.cpp), and the launch shape
// of a grid-stride loop over it.
//
// The logical order is kept (dims are only merged, never reordered), so a thread's
// linear index is the row-major position of its element in the logical shape; the
// kernels rely on that to report the first bad index and to number lines.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include <thd/error.h>
#include <thd/tensor.h>

#include "tensor/cuda/cuda_check.h"

namespace thd::cuda::index_detail {

// Dims left after merging; as torch's OffsetCalculator, which has the same limit.
inline constexpr int kMaxDims = 25;

template <int N>
struct Geometry {
  int ndim = 0;
  // Linear indices (and so every size) fit in 32 bits: unravel with 32-bit division,
  // several times cheaper on the GPU than 64-bit.
  bool narrow = true;
  int64_t numel = 1;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};  // elements, per operand

  // Element offsets of linear index i for every operand.
  __device__ void offsets(int64_t i, int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    if (ndim == 0) return;
    // The outermost coordinate is what is left after the inner ones: no division.
    int64_t outer;
    if (narrow) {
      auto r = static_cast<uint32_t>(i);
      for (int d = ndim - 1; d > 0; --d) {
        const auto size = static_cast<uint32_t>(sizes[d]);
        const uint32_t q = r / size;
        const auto c = static_cast<int64_t>(r - q * size);
        r = q;
#pragma unroll
        for (int k = 0; k < N; ++k) off[k] += c * strides[k][d];
      }
      outer = r;
    } else {
      int64_t r = i;
      for (int d = ndim - 1; d > 0; --d) {
        const int64_t q = r / sizes[d];
        const int64_t c = r - q * sizes[d];
        r = q;
#pragma unroll
        for (int k = 0; k < N; ++k) off[k] += c * strides[k][d];
      }
      outer = r;
    }
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += outer * strides[k][0];
  }
};

// The geometry of `shape` walked by N operands with `strides` (elements, one entry per
// dim of shape each). Size-1 dims are dropped and neighbours that every operand walks
// contiguously are merged. `op` names the caller if too many dims remain.
template <int N>
Geometry<N> make_geometry(const Shape& shape, const std::array<Shape, N>& strides,
                          const char* op) {
  Geometry<N> g;
  int64_t sizes[kMaxDims + 1];
  int64_t st[N][kMaxDims + 1];
  int nd = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    g.numel *= shape[d];
    if (shape[d] == 1) continue;
    bool merge = nd > 0;
    for (int k = 0; k < N && merge; ++k) merge = st[k][nd - 1] == strides[k][d] * shape[d];
    if (merge) {
      sizes[nd - 1] *= shape[d];
      for (int k = 0; k < N; ++k) st[k][nd - 1] = strides[k][d];
      continue;
    }
    if (nd == kMaxDims) {
      throw NotImplementedError(std::string(op) + ": more than " + std::to_string(kMaxDims) +
                                    " dims that cannot be merged are not supported on CUDA",
                                ErrorContext{.op = op});
    }
    sizes[nd] = shape[d];
    for (int k = 0; k < N; ++k) st[k][nd] = strides[k][d];
    ++nd;
  }
  g.ndim = nd;
  for (int d = 0; d < nd; ++d) {
    g.sizes[d] = sizes[d];
    for (int k = 0; k < N; ++k) g.strides[k][d] = st[k][d];
  }
  g.narrow = g.numel <= int64_t{UINT32_MAX};
  return g;
}

// Strides of t aligned to a shape of `ndim` dims that t broadcasts to (leading and
// size-1 dims of t get stride 0).
inline Shape broadcast_strides(const Tensor& t, size_t ndim) {
  Shape out(ndim, 0);
  const size_t off = ndim - t.shape().size();
  for (size_t i = 0; i < t.shape().size(); ++i) {
    out[off + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  }
  return out;
}

// Element offset of the element at row-major position pos of `shape` walked with
// `strides` (host side: reporting the element a kernel flagged).
inline int64_t offset_at(int64_t pos, const Shape& shape, const Shape& strides) {
  int64_t off = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    off += (pos % shape[d]) * strides[d];
    pos /= shape[d];
  }
  return off;
}

inline constexpr int kBlock = 256;

// Blocks for a grid-stride loop over n items: enough to fill every SM several times
// over, no more (each thread then handles a few items, which amortizes its setup).
inline unsigned grid_for(int64_t n, int device) {
  static std::atomic<int> sm_count[64] = {};  // per device, filled on first use
  const bool cached = device >= 0 && device < 64;
  int sms = cached ? sm_count[device].load(std::memory_order_relaxed) : 0;
  if (sms == 0) {
    THD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                   "launch");
    if (cached) sm_count[device].store(sms, std::memory_order_relaxed);
  }
  const int64_t want = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(want, int64_t{sms} * 16)));
}

// A grid-stride loop: f(i) for i in [0, n).
template <typename F>
__device__ __forceinline__ void grid_stride(int64_t n, F&& f) {
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += step) f(i);
}

// The element type that moves `Size` bytes: gather, scatter and masked_fill only
// move elements, so they are instantiated per element size, not per dtype.
template <int Size>
struct Bits;
template <>
struct Bits<1> {
  using type = uint8_t;
};
template <>
struct Bits<2> {
  using type = uint16_t;
};
template <>
struct Bits<4> {
  using type = uint32_t;
};
template <>
struct Bits<8> {
  using type = uint64_t;
};

// Calls f(Bits<size>{}) for an element size of 1, 2, 4 or 8 bytes.
template <typename F>
void dispatch_size(size_t size, F&& f) {
  switch (size) {
    case 1: return f(Bits<1>{});
    case 2: return f(Bits<2>{});
    case 4: return f(Bits<4>{});
    default: return f(Bits<8>{});
  }
}

}  // namespace thd::cuda::index_detail
