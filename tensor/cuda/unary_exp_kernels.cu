// CUDA kernels of exp, log, sqrt, rsqrt and sigmoid (elementwise_kernels.h).
#include "tensor/cuda/elementwise_ops.cuh"

namespace thd::cuda {

template void unary_op<functors::ExpOp>(const char*, DType, const Tensor&, const Tensor&);
template void unary_op<functors::LogOp>(const char*, DType, const Tensor&, const Tensor&);
template void unary_op<functors::SqrtOp>(const char*, DType, const Tensor&, const Tensor&);
template void unary_op<functors::RsqrtOp>(const char*, DType, const Tensor&, const Tensor&);
template void unary_op<functors::SigmoidOp>(const char*, DType, const Tensor&, const Tensor&);

}  // namespace thd::cuda
