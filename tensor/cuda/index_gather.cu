// gather and index_select on CUDA, and the range check of every index op.
//
// Out-of-range indices must raise the CPU's IndexError at the call, with no sticky
// CUDA error left behind (a device assert would poison the context). So a kernel
// that meets a bad index records the row-major position of the first one in a
// one-word flag (atomicMin) instead of reading through it; the host reads the flag
// back, which is the one synchronization these ops make.
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/cuda_stream.h"
#include "tensor/cuda/index_geometry.cuh"
#include "tensor/cuda/index_kernels.h"

namespace thd::cuda {

namespace {

using namespace index_detail;

// Position of the first bad index a launch met; every bit set when none.
using Flag = unsigned long long;
inline constexpr Flag kNoBadIndex = ~Flag{0};

__device__ __forceinline__ bool in_range(int64_t v, int64_t bound) {
  return static_cast<uint64_t>(v) < static_cast<uint64_t>(bound);  // negatives wrap high
}

template <typename I>
__global__ void check_index_kernel(Geometry<1> g, const I* index, int64_t bound,
                                   Flag* first_bad) {
  grid_stride(g.numel, [&](int64_t i) {
    int64_t off[1];
    g.offsets(i, off);
    if (!in_range(index[off[0]], bound)) atomicMin(first_bad, static_cast<Flag>(i));
  });
}

// Operands: out, self seen with out's shape and stride 0 along dim, index.
template <typename E, typename I>
__global__ void gather_kernel(Geometry<3> g, E* out, const E* self, const I* index,
                              int64_t step, int64_t bound, Flag* first_bad) {
  grid_stride(g.numel, [&](int64_t i) {
    int64_t off[3];
    g.offsets(i, off);
    const int64_t v = index[off[2]];
    if (in_range(v, bound)) {
      out[off[0]] = self[off[1] + v * step];
    } else {
      atomicMin(first_bad, static_cast<Flag>(i));
    }
  });
}

// A device word set to kNoBadIndex on `stream`, kept alive by the tensor.
Tensor make_flag(int device, cudaStream_t stream, const char* op) {
  Tensor flag = Tensor::empty({1}, kInt64, Device::cuda(device));
  THD_CUDA_CHECK(cudaMemsetAsync(flag.data_ptr(), 0xFF, sizeof(Flag), stream), op);
  return flag;
}

// Waits for `stream` and returns the value of the index element at the flagged
// position of `shape` (walked with the index's `strides`), if one was flagged.
std::optional<int64_t> read_flag(const Tensor& flag, const Tensor& index, const Shape& shape,
                                 const Shape& strides, cudaStream_t stream, const char* op) {
  Flag pos = kNoBadIndex;
  THD_CUDA_CHECK(
      cudaMemcpyAsync(&pos, flag.data_ptr(), sizeof(Flag), cudaMemcpyDeviceToHost, stream), op);
  THD_CUDA_CHECK(cudaStreamSynchronize(stream), op);
  if (pos == kNoBadIndex) return std::nullopt;
  const int64_t off = offset_at(static_cast<int64_t>(pos), shape, strides);
  const auto* at = static_cast<const char*>(index.data_ptr()) +
                   off * static_cast<int64_t>(index.element_size());
  if (index.dtype() == kInt32) {
    int32_t v = 0;
    THD_CUDA_CHECK(cudaMemcpy(&v, at, sizeof(v), cudaMemcpyDeviceToHost), op);
    return v;
  }
  int64_t v = 0;
  THD_CUDA_CHECK(cudaMemcpy(&v, at, sizeof(v), cudaMemcpyDeviceToHost), op);
  return v;
}

// Calls f(I{}) for the index's element type.
template <typename F>
void dispatch_index(DType dtype, F&& f) {
  if (dtype == kInt32) f(int32_t{});
  else f(int64_t{});
}

}  // namespace

std::optional<int64_t> find_bad_index(const Tensor& index, int64_t bound) {
  const char* op = "index check";
  if (index.numel() == 0) return std::nullopt;
  const int device = index.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  Tensor flag = make_flag(device, stream, op);
  const auto g = make_geometry<1>(index.shape(), {index.strides()}, op);
  dispatch_index(index.dtype(), [&](auto tag) {
    using I = decltype(tag);
    check_index_kernel<I><<<grid_for(g.numel, device), kBlock, 0, stream>>>(
        g, static_cast<const I*>(index.data_ptr()), bound, static_cast<Flag*>(flag.data_ptr()));
    THD_CUDA_CHECK_LAUNCH(op);
  });
  return read_flag(flag, index, index.shape(), index.strides(), stream, op);
}

std::optional<int64_t> gather_on_device(const Tensor& out, const Tensor& self, int64_t dim,
                                        const Tensor& index) {
  const char* op = "gather";
  if (out.numel() == 0) return std::nullopt;
  const int device = out.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  Tensor flag = make_flag(device, stream, op);
  Shape self_strides = self.strides();
  self_strides[dim] = 0;
  const auto g =
      make_geometry<3>(out.shape(), {out.strides(), self_strides, index.strides()}, op);
  dispatch_size(out.element_size(), [&](auto bits) {
    using E = typename decltype(bits)::type;
    dispatch_index(index.dtype(), [&](auto tag) {
      using I = decltype(tag);
      gather_kernel<E, I><<<grid_for(g.numel, device), kBlock, 0, stream>>>(
          g, static_cast<E*>(out.data_ptr()), static_cast<const E*>(self.data_ptr()),
          static_cast<const I*>(index.data_ptr()), self.stride(dim), self.size(dim),
          static_cast<Flag*>(flag.data_ptr()));
      THD_CUDA_CHECK_LAUNCH(op);
    });
  });
  return read_flag(flag, index, out.shape(), index.strides(), stream, op);
}

}  // namespace thd::cuda
