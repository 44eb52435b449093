// thd's dtypes and reduce ops as NCCL's, and what NCCL cannot do.
#include <gtest/gtest.h>

#include "datachannel/nccl/nccl_types.h"
#include "expect_throw.h"

namespace thd::test {
namespace {

using detail::nccl::reduction_for;
using detail::nccl::type_for;

TEST(NcclTypes, EveryDTypeHasTheNcclTypeOfItsLayout) {
  EXPECT_EQ(type_for(kBool), ncclUint8);
  EXPECT_EQ(type_for(kUInt8), ncclUint8);
  EXPECT_EQ(type_for(kInt8), ncclInt8);
  EXPECT_EQ(type_for(kInt32), ncclInt32);
  EXPECT_EQ(type_for(kInt64), ncclInt64);
  EXPECT_EQ(type_for(kFloat16), ncclFloat16);
  EXPECT_EQ(type_for(kBFloat16), ncclBfloat16);
  EXPECT_EQ(type_for(kFloat32), ncclFloat32);
  EXPECT_EQ(type_for(kFloat64), ncclFloat64);
}

TEST(NcclTypes, ReduceOpsMapOneToOne) {
  EXPECT_EQ(reduction_for(kFloat32, ReduceOp::Sum, "t").op, ncclSum);
  EXPECT_EQ(reduction_for(kFloat32, ReduceOp::Prod, "t").op, ncclProd);
  EXPECT_EQ(reduction_for(kInt64, ReduceOp::Max, "t").op, ncclMax);
  EXPECT_EQ(reduction_for(kInt64, ReduceOp::Min, "t").op, ncclMin);
  EXPECT_EQ(reduction_for(kBFloat16, ReduceOp::Avg, "t").op, ncclAvg);
  EXPECT_EQ(reduction_for(kFloat16, ReduceOp::Avg, "t").type, ncclFloat16);
  EXPECT_EQ(reduction_for(kBFloat16, ReduceOp::Sum, "t").type, ncclBfloat16);
}

TEST(NcclTypes, BoolReducesAsLogicalOrAndAnd) {
  // As the CPU backends: sum and max are or, prod and min are and.
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::BOr}) {
    const auto r = reduction_for(kBool, op, "t");
    EXPECT_EQ(r.type, ncclUint8);
    EXPECT_EQ(r.op, ncclMax) << reduce_op_name(op);
  }
  for (ReduceOp op : {ReduceOp::Prod, ReduceOp::Min, ReduceOp::BAnd}) {
    EXPECT_EQ(reduction_for(kBool, op, "t").op, ncclMin) << reduce_op_name(op);
  }
}

TEST(NcclTypes, RefusalsNameTheOpAndTheWayOut) {
  // What thd refuses on every backend stays a TypeError.
  THD_EXPECT_THROW_MSG(reduction_for(kInt32, ReduceOp::Avg, "all_reduce"), TypeError, "avg");
  THD_EXPECT_THROW_MSG(reduction_for(kFloat32, ReduceOp::BAnd, "all_reduce"), TypeError, "band");
  // NCCL has no bitwise reductions: on CUDA tensors thd refuses them (as torch's
  // ProcessGroupNCCL does) with NotImplementedError, naming the way out (t.cpu()).
  THD_EXPECT_THROW_MSG(reduction_for(kInt32, ReduceOp::BXor, "all_reduce"), NotImplementedError,
                       "reduce op bxor on int32 is not available on CUDA tensors");
  THD_EXPECT_THROW_MSG(reduction_for(kBool, ReduceOp::BXor, "reduce"), NotImplementedError, "t.cpu()");
  THD_EXPECT_THROW_MSG(reduction_for(kUInt8, ReduceOp::BOr, "reduce"), NotImplementedError, "NCCL reduces with");
}

}  // namespace
}  // namespace thd::test
