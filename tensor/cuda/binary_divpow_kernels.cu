// CUDA kernels of div and pow (elementwise_kernels.h), and the check of integer pow's
// exponent.
#include "tensor/cuda/elementwise_ops.cuh"

namespace thd::cuda {

template void binary_op<functors::DivOp>(const char*, DType, const Tensor&, const Operand&,
                                         const Operand&);
template void binary_op<functors::PowOp>(const char*, DType, const Tensor&, const Operand&,
                                         const Operand&);

namespace {

// Sets *found when some element of the piece is negative.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    negative_kernel(const char* base, OffsetCalculator<1> offsets, uint32_t numel, int* found) {
  const uint32_t stride = gridDim.x * blockDim.x;
  bool negative = false;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += stride) {
    int32_t off[1];
    offsets.get(i, off);
    negative = negative || *reinterpret_cast<const T*>(base + off[0]) < T(0);
  }
  if (negative) *found = 1;  // a benign race: every writer writes 1
}

}  // namespace

bool has_negative(const char* op, const Tensor& t) {
  if (t.numel() == 0) return false;
  const int device = t.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  Tensor flag = Tensor::empty({}, kInt32, t.device());
  int* found = flag.data<int32_t>();
  THD_CUDA_CHECK(cudaMemsetAsync(found, 0, sizeof(int), stream), op);
  const Geometry<1> g = make_geometry<1>({&t});
  dispatch<thd::detail::kIntegerSet>(t.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_signed_v<T>) {
      for_each_32bit_piece(g, [&](const Geometry<1>& piece) {
        negative_kernel<T><<<grid_for(piece.numel, device), kThreads, 0, stream>>>(
            piece.base[0], OffsetCalculator<1>(piece), static_cast<uint32_t>(piece.numel), found);
        THD_CUDA_CHECK_LAUNCH(op);
      });
    }
  });
  // The answer decides whether the op raises, so it cannot wait: read it now.
  int host = 0;
  THD_CUDA_CHECK(cudaMemcpyAsync(&host, found, sizeof(int), cudaMemcpyDeviceToHost, stream), op);
  THD_CUDA_CHECK(cudaStreamSynchronize(stream), op);
  return host != 0;
}

}  // namespace thd::cuda
