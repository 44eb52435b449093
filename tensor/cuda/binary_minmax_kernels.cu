// CUDA kernels of maximum and minimum (elementwise_kernels.h).
#include "tensor/cuda/elementwise_ops.cuh"

namespace thd::cuda {

template void binary_op<functors::MaximumOp>(const char*, DType, const Tensor&, const Operand&,
                                             const Operand&);
template void binary_op<functors::MinimumOp>(const char*, DType, const Tensor&, const Operand&,
                                             const Operand&);

}  // namespace thd::cuda
