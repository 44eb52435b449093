// var / std of CUDA tensors: the corrected two-pass algorithm in double, as on the
// CPU. The first pass writes each output's mean to a double scratch tensor laid out
// like the result; the second folds the deviations from it.
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/reduce_families.h"
#include "tensor/cuda/reduce_kernels.cuh"
#include "tensor/cuda/reduce_ops.cuh"
#include "tensor/cuda/reduce_plan.h"

namespace thd::cuda {

using namespace reduce_detail;
using thd::detail::kFloatingSet;

Tensor reduce_var(const Tensor& in, const ReduceRequest& request) {
  const bool take_sqrt = request.kind == ReduceKind::Std;
  const char* name = take_sqrt ? "std" : "var";
  return dispatch<kFloatingSet>(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const ReducePlan plan = plan_reduce(in, request.mask, false);
    const auto n = static_cast<double>(plan.layout.n_red);
    Tensor means = Tensor::empty(request.out_shape, kFloat64, in.device());
    SumOp<T, double> mean_op;
    mean_op.proj = {SumProjection::kDiv, n};
    run_reduce(mean_op, plan, means, name);
    VarOp<T> var_op;
    var_op.means = static_cast<const double*>(means.data_ptr());
    var_op.n = n;
    var_op.correction = static_cast<double>(request.correction);
    var_op.take_sqrt = take_sqrt;
    Tensor out = Tensor::empty(request.out_shape, in.dtype(), in.device());
    run_reduce(var_op, plan, out, name);
    return out;
  });
}

}  // namespace thd::cuda
