// any / all of CUDA tensors: bool results for every input dtype.
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/reduce_families.h"
#include "tensor/cuda/reduce_kernels.cuh"
#include "tensor/cuda/reduce_ops.cuh"
#include "tensor/cuda/reduce_plan.h"

namespace thd::cuda {

using namespace reduce_detail;
using thd::detail::kAllSet;

namespace {

template <bool IsAny>
Tensor run_logical(const Tensor& in, const ReduceRequest& request, const char* name) {
  return dispatch<kAllSet>(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor out = Tensor::empty(request.out_shape, kBool, in.device());
    run_reduce(AnyAllOp<T, IsAny>{}, plan_reduce(in, request.mask, false), out, name);
    return out;
  });
}

}  // namespace

Tensor reduce_logical(const Tensor& in, const ReduceRequest& request) {
  return request.kind == ReduceKind::Any ? run_logical<true>(in, request, "any")
                                         : run_logical<false>(in, request, "all");
}

}  // namespace thd::cuda
