// max, min and the inf norms of CUDA tensors: NaN wins, as on the CPU.
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/reduce_families.h"
#include "tensor/cuda/reduce_kernels.cuh"
#include "tensor/cuda/reduce_ops.cuh"
#include "tensor/cuda/reduce_plan.h"

namespace thd::cuda {

using namespace reduce_detail;
using thd::detail::kAllSet;
using thd::detail::kFloatingSet;

namespace {

template <bool IsMax, bool Abs, unsigned Allowed>
Tensor run_extreme(const Tensor& in, const ReduceRequest& request, const char* name) {
  return dispatch<Allowed>(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor out = Tensor::empty(request.out_shape, in.dtype(), in.device());
    run_reduce(ExtremeOp<T, IsMax, Abs>{}, plan_reduce(in, request.mask, false), out, name);
    return out;
  });
}

}  // namespace

Tensor reduce_extreme(const Tensor& in, const ReduceRequest& request, bool is_max, bool abs) {
  if (abs) {
    return is_max ? run_extreme<true, true, kFloatingSet>(in, request, "norm")
                  : run_extreme<false, true, kFloatingSet>(in, request, "norm");
  }
  return is_max ? run_extreme<true, false, kAllSet>(in, request, "max")
                : run_extreme<false, false, kAllSet>(in, request, "min");
}

}  // namespace thd::cuda
