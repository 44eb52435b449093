// The CUDA reductions by kernel family, one .cu file each so they compile in
// parallel; reduce_entry.cpp picks one per ReduceKind.
#pragma once

#include <thd/tensor.h>

#include "tensor/cuda/reduce.h"

namespace thd::cuda {

// sum, mean, prod and the finite norms (reduce_sum.cu).
Tensor reduce_sums(const Tensor& in, const ReduceRequest& request);
// max, min and the inf norms (reduce_extreme.cu); abs: of |x|.
Tensor reduce_extreme(const Tensor& in, const ReduceRequest& request, bool is_max, bool abs);
// argmax, argmin (reduce_arg.cu).
Tensor reduce_arg(const Tensor& in, const ReduceRequest& request);
// any, all (reduce_logical.cu).
Tensor reduce_logical(const Tensor& in, const ReduceRequest& request);
// var, std (reduce_var.cu).
Tensor reduce_var(const Tensor& in, const ReduceRequest& request);

}  // namespace thd::cuda
