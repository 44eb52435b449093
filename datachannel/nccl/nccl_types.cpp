#include "datachannel/nccl/nccl_types.h"

#include <string>

#include "datachannel/check.h"
#include "datachannel/collectives/reduce_kernels.h"

namespace thd::detail::nccl {

ncclDataType_t type_for(DType dtype) {
  switch (dtype) {
    case DType::Bool:
    case DType::UInt8: return ncclUint8;
    case DType::Int8: return ncclInt8;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
  }
  THD_THROW(TypeError, "nccl", "dtype {} has no NCCL type", static_cast<int>(dtype));
}

Reduction reduction_for(DType dtype, ReduceOp op, std::string_view caller) {
  check_reduce_op(dtype, op, caller);
  const ncclDataType_t type = type_for(dtype);
  if (dtype == DType::Bool) {
    // Bytes that are 0 or nonzero: the max is nonzero iff any is (or), the min iff
    // all are (and).
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Max:
      case ReduceOp::BOr: return {type, ncclMax};
      case ReduceOp::Prod:
      case ReduceOp::Min:
      case ReduceOp::BAnd: return {type, ncclMin};
      case ReduceOp::BXor:
      case ReduceOp::Avg: break;
    }
  } else {
    switch (op) {
      case ReduceOp::Sum: return {type, ncclSum};
      case ReduceOp::Prod: return {type, ncclProd};
      case ReduceOp::Max: return {type, ncclMax};
      case ReduceOp::Min: return {type, ncclMin};
      case ReduceOp::Avg:
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
        return {type, ncclAvg};
#else
        THD_THROW(NotImplementedError, std::string(caller),
                  "reduce op avg needs NCCL 2.10 or later (ncclAvg); this thd was built against NCCL {}.{}.{}: "
                  "reduce with sum and divide by the group's size",
                  NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
#endif
      case ReduceOp::BAnd:
      case ReduceOp::BOr:
      case ReduceOp::BXor: break;
    }
  }
  THD_THROW(NotImplementedError, std::string(caller),
            "reduce op {} on {} is not available on CUDA tensors: NCCL reduces with sum, prod, max, min and avg "
            "only; copy the tensor to the CPU (t.cpu()) and reduce it there",
            reduce_op_name(op), dtype_name(dtype));
}

}  // namespace thd::detail::nccl
