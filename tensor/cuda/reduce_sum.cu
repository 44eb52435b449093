// sum, mean, prod and the finite p-norms of CUDA tensors: sums in double for floating
// inputs (in int64, wrapping, for integers and bool), as on the CPU.
#include <cmath>

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

// The finite norms as a floating sum: what is added, and how the sum ends.
void norm_parts(double p, SumMap& map, SumProjection& proj) {
  if (p == 0) {
    map = {SumMap::kNonZero, 0};
    proj = {SumProjection::kCast, 1};
  } else if (p == 1) {
    map = {SumMap::kAbs, 0};
    proj = {SumProjection::kCast, 1};
  } else if (p == 2) {
    map = {SumMap::kSquare, 0};
    proj = {SumProjection::kSqrt, 1};
  } else {
    map = {SumMap::kPowAbs, p};
    proj = {SumProjection::kRoot, 1.0 / p};
  }
}

}  // namespace

Tensor reduce_sums(const Tensor& in, const ReduceRequest& request) {
  switch (request.kind) {
    case ReduceKind::Sum:
      return dispatch<kAllSet>(in.dtype(), "sum", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using Out = sum_out_t<T>;
        Tensor out = Tensor::empty(request.out_shape, is_float_v<T> ? in.dtype() : kInt64,
                                   in.device());
        run_reduce(SumOp<T, Out>{}, plan_reduce(in, request.mask, false), out, "sum");
        return out;
      });
    case ReduceKind::Prod:
      return dispatch<kAllSet>(in.dtype(), "prod", [&](auto tag) {
        using T = typename decltype(tag)::type;
        Tensor out = Tensor::empty(request.out_shape, is_float_v<T> ? in.dtype() : kInt64,
                                   in.device());
        run_reduce(ProdOp<T>{}, plan_reduce(in, request.mask, false), out, "prod");
        return out;
      });
    default: {
      const bool is_mean = request.kind == ReduceKind::Mean;
      const char* name = is_mean ? "mean" : "norm";
      return dispatch<kFloatingSet>(in.dtype(), name, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const ReducePlan plan = plan_reduce(in, request.mask, false);
        SumOp<T, T> op;
        if (is_mean) {
          op.proj = {SumProjection::kDiv, static_cast<double>(plan.layout.n_red)};
        } else {
          norm_parts(request.p, op.map, op.proj);
        }
        Tensor out = Tensor::empty(request.out_shape, in.dtype(), in.device());
        run_reduce(op, plan, out, name);
        return out;
      });
    }
  }
}

}  // namespace thd::cuda
