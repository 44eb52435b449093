// Reductions written into an existing tensor (CPU tensors): the same kernels as the
// allocating ops, writing `out` in place of a new result. For a caller that keeps a
// result's storage from one run of an op to the next (a worker's graph replays,
// docs/graphs.md).
//
// `out` must be contiguous, of the result's shape and dtype, on the CPU, and share
// no storage with the input. Each returns true when it wrote `out` with the very
// values the allocating op would have made, and false, with nothing written, for
// anything else (a CUDA input among them): the caller then runs the op as usual. An
// input or a dim the op refuses raises the op's error.
#pragma once

#include <cstdint>
#include <optional>

#include <thd/tensor.h>

namespace thd::detail {

enum class IntoReduce { Sum, Mean, Prod, Max, Min, Any, All, Argmax, Argmin, Norm, Var, Std };

struct ReduceArgs {
  bool all_dims = true;  // over every element (dims ignored)
  Dims dims;             // Argmax/Argmin: dims[0]
  bool keepdim = false;
  double p = 2.0;          // Norm
  int64_t correction = 1;  // Var, Std
};

bool reduce_into(IntoReduce kind, const Tensor& out, const Tensor& a, const ReduceArgs& args);

}  // namespace thd::detail
