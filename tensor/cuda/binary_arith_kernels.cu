// CUDA kernels of add, sub and mul (elementwise_kernels.h).
#include "tensor/cuda/elementwise_ops.cuh"

namespace thd::cuda {

template void binary_op<functors::AddOp>(const char*, DType, const Tensor&, const Operand&,
                                         const Operand&);
template void binary_op<functors::SubOp>(const char*, DType, const Tensor&, const Operand&,
                                         const Operand&);
template void binary_op<functors::MulOp>(const char*, DType, const Tensor&, const Operand&,
                                         const Operand&);

}  // namespace thd::cuda
