// What NCCL calls thd's dtypes and reduce ops.
#pragma once

#include <nccl.h>

#include <string_view>

#include <thd/datachannel.h>
#include <thd/dtype.h>

namespace thd::detail::nccl {

// An NCCL reduction: the element type it reads and the op it applies.
struct Reduction {
  ncclDataType_t type;
  ncclRedOp_t op;
};

// How `op` over `dtype` runs in NCCL, with the CPU backends' semantics: bool is
// reduced as bytes (sum and max as max, i.e. logical or; prod and min as min,
// logical and), Avg is NCCL's own average. TypeError for what thd refuses on
// every backend (check_reduce_op: Avg on integers, bitwise ops on floats);
// NotImplementedError for what NCCL lacks: bitwise band/bor/bxor (NCCL has sum,
// prod, max, min and avg), named with the way out.
Reduction reduction_for(DType dtype, ReduceOp op, std::string_view caller);

// The NCCL type with this dtype's layout, for operations that only move data.
ncclDataType_t type_for(DType dtype);

}  // namespace thd::detail::nccl
