// Definitions of the typed entry points of elementwise_kernels.h, shared by the .cu
// files that instantiate them (one group of ops per file, so they build in parallel):
// the switch from the compute dtype to a storage type, then the generic launch.
#pragma once

#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/elementwise_kernels.h"
#include "tensor/cuda/elementwise_loops.cuh"

namespace thd::cuda {

template <typename T>
Input<T> input_of(const Operand& operand) {
  if (operand.tensor() != nullptr) return tensor_input<T>(*operand.tensor());
  return value_input<T>(scalar_as<T>(operand.value()));
}

template <typename Op>
void unary_op(const char* op, DType dtype, const Tensor& out, const Tensor& in) {
  dispatch<functors::unary_dtypes_v<Op>>(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise<T>(op, Op{}, out, tensor_input<T>(in));
  });
}

template <typename Op>
void binary_op(const char* op, DType compute, const Tensor& out, const Operand& a,
               const Operand& b) {
  dispatch<Op::kDTypes>(compute, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise<T>(op, Op{}, out, input_of<T>(a), input_of<T>(b));
  });
}

template <typename Op>
void compare_op(const char* op, DType compute, const Tensor& out, const Operand& a,
                const Operand& b) {
  dispatch<thd::detail::kAllSet>(compute, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise<bool>(op, Op{}, out, input_of<T>(a), input_of<T>(b));
  });
}

}  // namespace thd::cuda
