// scatter (tensor and scalar source) and masked_fill on CUDA.
//
// Scatter with a tensor source must give the CPU's result where indices repeat: the
// CPU walks each line along dim in order, so the last write to a target wins. Lines
// that are short run on one thread each, in order. Longer lines would leave most of
// the GPU idle that way, so they take two passes instead: every element claims its
// target with atomicMax of its position in the line, then only the claim's winner
// writes. A scalar source writes the same value wherever indices repeat, so any
// order gives the CPU's result and it is one plain pass.
#include <cstring>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/cuda_stream.h"
#include "tensor/cuda/index_geometry.cuh"
#include "tensor/cuda/index_kernels.h"

namespace thd::cuda {

namespace {

using namespace index_detail;

// Lines no longer than this run on one thread each.
inline constexpr int64_t kMaxLineForThread = 8;

template <typename E>
E from_bits(uint64_t bits) {
  E v;
  std::memcpy(&v, &bits, sizeof(E));
  return v;
}

// Operands: self seen with index's shape and stride 0 along dim, index.
template <typename E>
__global__ void scatter_fill_kernel(Geometry<2> g, E* self, const int64_t* index, int64_t step,
                                    E value) {
  grid_stride(g.numel, [&](int64_t i) {
    int64_t off[2];
    g.offsets(i, off);
    self[off[0] + index[off[1]] * step] = value;
  });
}

// One thread per line. The geometry is index's shape with size 1 along dim;
// operands: self (stride 0 along dim), src, index.
template <typename E>
__global__ void scatter_lines_kernel(Geometry<3> g, E* self, const E* src, const int64_t* index,
                                     int64_t n, int64_t self_step, int64_t src_step,
                                     int64_t index_step) {
  grid_stride(g.numel, [&](int64_t i) {
    int64_t off[3];
    g.offsets(i, off);
    for (int64_t k = 0; k < n; ++k) {
      self[off[0] + index[off[2] + k * index_step] * self_step] = src[off[1] + k * src_step];
    }
  });
}

// Where element i of index's shape lies: its line (row-major over the dims other than
// dim) and its position k along dim. inner is the product of the sizes after dim.
struct LinePos {
  int64_t line;
  int64_t k;
};
__device__ __forceinline__ LinePos line_pos(int64_t i, int64_t inner, int64_t n, bool narrow) {
  if (narrow) {
    const auto u = static_cast<uint32_t>(i);
    const auto in = static_cast<uint32_t>(inner);
    const uint32_t q = u / in;  // (outer, k)
    const uint32_t outer = q / static_cast<uint32_t>(n);
    return {int64_t{outer} * inner + (u - q * in), int64_t{q - outer * static_cast<uint32_t>(n)}};
  }
  const int64_t q = i / inner;
  const int64_t outer = q / n;
  return {outer * inner + (i - q * inner), q - outer * n};
}

// Pass 1: claim[line][target] = the largest k that writes there. Operand: index.
__global__ void scatter_claim_kernel(Geometry<1> g, const int64_t* index, int64_t inner,
                                     int64_t n, int64_t targets, int* claim) {
  grid_stride(g.numel, [&](int64_t i) {
    int64_t off[1];
    g.offsets(i, off);
    const LinePos p = line_pos(i, inner, n, g.narrow);
    atomicMax(claim + p.line * targets + index[off[0]], static_cast<int>(p.k));
  });
}

// Pass 2: the winners write. Operands: self (stride 0 along dim), src, index.
template <typename E>
__global__ void scatter_winners_kernel(Geometry<3> g, E* self, const E* src, const int64_t* index,
                                       int64_t self_step, int64_t inner, int64_t n,
                                       int64_t targets, const int* claim) {
  grid_stride(g.numel, [&](int64_t i) {
    int64_t off[3];
    g.offsets(i, off);
    const LinePos p = line_pos(i, inner, n, g.narrow);
    const int64_t t = index[off[2]];
    if (claim[p.line * targets + t] == static_cast<int>(p.k)) {
      self[off[0] + t * self_step] = src[off[1]];
    }
  });
}

// Operands: self, mask (bytes, stride 0 where it broadcasts).
template <typename E>
__global__ void masked_fill_kernel(Geometry<2> g, E* self, const uint8_t* mask, E value) {
  grid_stride(g.numel, [&](int64_t i) {
    int64_t off[2];
    g.offsets(i, off);
    if (mask[off[1]] != 0) self[off[0]] = value;
  });
}

Shape restrided(const Tensor& t, int64_t dim) {
  Shape s = t.strides();
  s[dim] = 0;
  return s;
}

}  // namespace

void scatter_fill_on_device(const Tensor& self, int64_t dim, const Tensor& index,
                            uint64_t value_bits) {
  const char* op = "scatter";
  if (index.numel() == 0) return;
  const int device = self.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  const auto g = make_geometry<2>(index.shape(), {restrided(self, dim), index.strides()}, op);
  dispatch_size(self.element_size(), [&](auto bits) {
    using E = typename decltype(bits)::type;
    scatter_fill_kernel<E><<<grid_for(g.numel, device), kBlock, 0, stream>>>(
        g, static_cast<E*>(self.data_ptr()), static_cast<const int64_t*>(index.data_ptr()),
        self.stride(dim), from_bits<E>(value_bits));
    THD_CUDA_CHECK_LAUNCH(op);
  });
}

void scatter_on_device(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  const char* op = "scatter";
  if (index.numel() == 0) return;
  const int device = self.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  const int64_t n = index.size(dim);
  const int64_t lines = index.numel() / n;
  const int64_t targets = self.size(dim);
  // The claim table has a word per (line, target): fine while it stays within a small
  // multiple of the work itself (and positions along dim fit its int words).
  const bool by_thread = n <= kMaxLineForThread || n > INT32_MAX ||
                         lines * targets > std::max<int64_t>(int64_t{1} << 24, 16 * index.numel());
  if (by_thread) {
    Shape line_shape = index.shape();
    line_shape[dim] = 1;
    const auto g = make_geometry<3>(
        line_shape, {restrided(self, dim), src.strides(), index.strides()}, op);
    dispatch_size(self.element_size(), [&](auto bits) {
      using E = typename decltype(bits)::type;
      scatter_lines_kernel<E><<<grid_for(g.numel, device), kBlock, 0, stream>>>(
          g, static_cast<E*>(self.data_ptr()), static_cast<const E*>(src.data_ptr()),
          static_cast<const int64_t*>(index.data_ptr()), n, self.stride(dim), src.stride(dim),
          index.stride(dim));
      THD_CUDA_CHECK_LAUNCH(op);
    });
    return;
  }
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < index.dim(); ++d) inner *= index.size(d);
  Tensor claim = Tensor::empty({lines * targets}, kInt32, Device::cuda(device));
  THD_CUDA_CHECK(cudaMemsetAsync(claim.data_ptr(), 0xFF, claim.nbytes(), stream), op);  // -1
  const auto gi = make_geometry<1>(index.shape(), {index.strides()}, op);
  scatter_claim_kernel<<<grid_for(gi.numel, device), kBlock, 0, stream>>>(
      gi, static_cast<const int64_t*>(index.data_ptr()), inner, n, targets,
      static_cast<int*>(claim.data_ptr()));
  THD_CUDA_CHECK_LAUNCH(op);
  const auto g = make_geometry<3>(index.shape(),
                                  {restrided(self, dim), src.strides(), index.strides()}, op);
  dispatch_size(self.element_size(), [&](auto bits) {
    using E = typename decltype(bits)::type;
    scatter_winners_kernel<E><<<grid_for(g.numel, device), kBlock, 0, stream>>>(
        g, static_cast<E*>(self.data_ptr()), static_cast<const E*>(src.data_ptr()),
        static_cast<const int64_t*>(index.data_ptr()), self.stride(dim), inner, n, targets,
        static_cast<const int*>(claim.data_ptr()));
    THD_CUDA_CHECK_LAUNCH(op);
  });
}

void masked_fill_on_device(const Tensor& self, const Tensor& mask, uint64_t value_bits) {
  const char* op = "masked_fill_";
  if (self.numel() == 0) return;
  const int device = self.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  const auto g = make_geometry<2>(
      self.shape(), {self.strides(), broadcast_strides(mask, self.shape().size())}, op);
  dispatch_size(self.element_size(), [&](auto bits) {
    using E = typename decltype(bits)::type;
    masked_fill_kernel<E><<<grid_for(g.numel, device), kBlock, 0, stream>>>(
        g, static_cast<E*>(self.data_ptr()), static_cast<const uint8_t*>(mask.data_ptr()),
        from_bits<E>(value_bits));
    THD_CUDA_CHECK_LAUNCH(op);
  });
}

}  // namespace thd::cuda
