// float16 and bfloat16 reductions accumulate in float32, as torch.distributed
// expects of them: every partial sum or product rounded back to 16 bits would
// lose a bit or more at each step of an algorithm (4 ranks' float16 15464 + 5632
// - 13960 - 7592 come out -464, not -456), and the loss would depend on the
// algorithm and on which rank reduced which block. So the input is widened to a
// float32 scratch copy once, the float32 reduction runs on that (the algorithms
// here, a backend's native collectives, NCCL), and the result is rounded to 16
// bits once, at the end: every rank rounds the same float32 bits, so every rank
// ends with the same 16-bit result. Min and Max pick one of their operands, which
// is exact in 16 bits, so they stay there.
#pragma once

#include <thd/datachannel.h>
#include <thd/dtype.h>

#include <cstddef>
#include <functional>

namespace thd::detail {

// Whether a reduction of `dtype` by `op` runs in float32: float16 and bfloat16
// under Sum, Avg and Prod.
bool accumulates_in_float32(DType dtype, ReduceOp op);

// The float32 scratch, in bytes, that such a reduction over `elements` input
// elements and `out_elements` output elements takes (all_reduce and reduce: the
// same buffer, out_elements 0; reduce_scatter: its output's count as well); 0
// when it does not widen.
size_t float32_accumulation_bytes(DType dtype, ReduceOp op, size_t elements, size_t out_elements = 0);

// In place (all_reduce, reduce): runs `reduce` over a float32 copy of the `count`
// 16-bit elements of `dtype` at `data`, then rounds the copy back into data once,
// unless write_back is false (a reduce's non-root, whose buffer must not change).
// `data` is not written when `reduce` throws.
void reduce_in_float32(void* data, size_t count, DType dtype, bool write_back,
                       const std::function<void(float* wide)>& reduce);

// reduce_scatter's form: `in` (in_count elements) is widened, `reduce` writes
// out_count float32 results, and those are rounded into `out` once.
void reduce_in_float32(const void* in, size_t in_count, void* out, size_t out_count, DType dtype,
                       const std::function<void(const float* wide_in, float* wide_out)>& reduce);

// The conversions, for a device or library path that widens on its own: count
// 16-bit elements of `dtype` to float32 and back (round to nearest even).
void widen_to_float32(const void* in, float* out, size_t count, DType dtype);
void narrow_from_float32(const float* in, void* out, size_t count, DType dtype);

}  // namespace thd::detail
