// CUDA kernels of sin, cos, tanh and gelu (elementwise_kernels.h).
#include "tensor/cuda/elementwise_ops.cuh"

namespace thd::cuda {

template void unary_op<functors::SinOp>(const char*, DType, const Tensor&, const Tensor&);
template void unary_op<functors::CosOp>(const char*, DType, const Tensor&, const Tensor&);
template void unary_op<functors::TanhOp>(const char*, DType, const Tensor&, const Tensor&);
template void unary_op<functors::GeluOp>(const char*, DType, const Tensor&, const Tensor&);

}  // namespace thd::cuda
