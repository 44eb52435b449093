// Reductions of CUDA tensors: the device half of tensor/reduce.cpp, which validates
// the arguments exactly as for the CPU (dims, dtypes, empty reductions without an
// identity) and then hands a CUDA tensor here. Results have the CPU's dtypes and
// values (up to floating-point rounding) and are computed asynchronously on the
// current stream of the input's device.
#pragma once

#include <cstdint>
#include <vector>

#include <thd/tensor.h>

namespace thd::cuda {

enum class ReduceKind : uint8_t { Sum, Mean, Prod, Max, Min, ArgMax, ArgMin, Any, All, Norm, Var, Std };

struct ReduceRequest {
  ReduceKind kind = ReduceKind::Sum;
  std::vector<bool> mask;  // per dim of the input: reduce it
  Shape out_shape;         // the result's shape (keepdim applied)
  double p = 2.0;          // Norm
  int64_t correction = 1;  // Var, Std
};

// The reduction `request` describes of `in`, a new tensor on in's device.
Tensor reduce(const Tensor& in, const ReduceRequest& request);

}  // namespace thd::cuda
