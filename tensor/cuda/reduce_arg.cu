// argmax / argmin of CUDA tensors: the first extreme, NaN counting as the extreme.
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/reduce_families.h"
#include "tensor/cuda/reduce_kernels.cuh"
#include "tensor/cuda/reduce_ops.cuh"
#include "tensor/cuda/reduce_plan.h"

namespace thd::cuda {

using namespace reduce_detail;
using thd::detail::kNumericSet;

namespace {

template <bool IsMax>
Tensor run_arg(const Tensor& in, const ReduceRequest& request, const char* name) {
  return dispatch<kNumericSet>(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor out = Tensor::empty(request.out_shape, kInt64, in.device());
    // ordered_index: the kernels must see each element's row-major position.
    run_reduce(ArgOp<T, IsMax>{}, plan_reduce(in, request.mask, true), out, name);
    return out;
  });
}

}  // namespace

Tensor reduce_arg(const Tensor& in, const ReduceRequest& request) {
  return request.kind == ReduceKind::ArgMax ? run_arg<true>(in, request, "argmax")
                                            : run_arg<false>(in, request, "argmin");
}

}  // namespace thd::cuda
