// CUDA kernels of neg, abs and relu (elementwise_kernels.h).
#include "tensor/cuda/elementwise_ops.cuh"

namespace thd::cuda {

template void unary_op<functors::NegOp>(const char*, DType, const Tensor&, const Tensor&);
template void unary_op<functors::AbsOp>(const char*, DType, const Tensor&, const Tensor&);
template void unary_op<functors::ReluOp>(const char*, DType, const Tensor&, const Tensor&);

}  // namespace thd::cuda
