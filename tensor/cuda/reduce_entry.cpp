#include <cmath>

#include "tensor/check.h"
#include "tensor/cuda/reduce.h"
#include "tensor/cuda/reduce_families.h"

namespace thd::cuda {

Tensor reduce(const Tensor& in, const ReduceRequest& request) {
  switch (request.kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean:
    case ReduceKind::Prod:
      return reduce_sums(in, request);
    case ReduceKind::Max:
      return reduce_extreme(in, request, true, false);
    case ReduceKind::Min:
      return reduce_extreme(in, request, false, false);
    case ReduceKind::ArgMax:
    case ReduceKind::ArgMin:
      return reduce_arg(in, request);
    case ReduceKind::Any:
    case ReduceKind::All:
      return reduce_logical(in, request);
    case ReduceKind::Norm:
      if (std::isinf(request.p)) return reduce_extreme(in, request, request.p > 0, true);
      return reduce_sums(in, request);
    case ReduceKind::Var:
    case ReduceKind::Std:
      return reduce_var(in, request);
  }
  THD_THROW(ValueError, "reduce", "unknown reduction kind {}", static_cast<int>(request.kind));
}

}  // namespace thd::cuda
