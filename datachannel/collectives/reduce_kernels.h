// The reduction arithmetic of the collectives: acc = acc op in, elementwise, for
// every dtype (switch over dtype; vectorized loops; float16/bfloat16 through float).
#pragma once

#include <thd/datachannel.h>
#include <thd/dtype.h>

#include <cstddef>

namespace thd::detail {

// Throws TypeError when op does not apply to dtype (Avg on integers or bool,
// BAnd/BOr/BXor on floating point), naming both. The DataChannel checks before a
// collective starts, so no rank fails halfway through one.
void check_reduce_op(DType dtype, ReduceOp op, std::string_view caller);

// acc[i] = acc[i] op in[i] for i < count. Avg accumulates as Sum. For bool, Sum
// and Max are logical or, Prod and Min logical and.
void reduce_into(void* acc, const void* in, size_t count, DType dtype, ReduceOp op);
// out[i] = a[i] op b[i] (out may alias a or b).
void reduce_into(void* out, const void* a, const void* b, size_t count, DType dtype, ReduceOp op);

// The last step of a reduction over group_size contributions: Avg divides by
// group_size; every other op leaves data alone.
void finish_reduce(void* data, size_t count, DType dtype, ReduceOp op, int group_size);

}  // namespace thd::detail
