// CUDA kernels of eq, ne, lt, le, gt and ge (elementwise_kernels.h).
#include "tensor/cuda/elementwise_ops.cuh"

namespace thd::cuda {

template void compare_op<functors::EqOp>(const char*, DType, const Tensor&, const Operand&,
                                         const Operand&);
template void compare_op<functors::NeOp>(const char*, DType, const Tensor&, const Operand&,
                                         const Operand&);
template void compare_op<functors::LtOp>(const char*, DType, const Tensor&, const Operand&,
                                         const Operand&);
template void compare_op<functors::LeOp>(const char*, DType, const Tensor&, const Operand&,
                                         const Operand&);
template void compare_op<functors::GtOp>(const char*, DType, const Tensor&, const Operand&,
                                         const Operand&);
template void compare_op<functors::GeOp>(const char*, DType, const Tensor&, const Operand&,
                                         const Operand&);

}  // namespace thd::cuda
