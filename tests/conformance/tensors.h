// The tensors the suite sends: contents that differ per rank and per element (so
// a block that lands in the wrong place is caught), and reduction operands chosen
// so that the exact result is representable in every dtype whatever order a
// backend combines them in; the reference results are computed here, in int64 or
// double, never by thd.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <thd/datachannel.h>
#include <thd/tensor.h>

namespace thd::conformance {

// Every dtype thd has.
const std::vector<DType>& all_dtypes();
// The element counts every op is run with: empty, one element, an odd count.
inline const std::vector<int64_t> kSmallSizes = {0, 1, 7};
// 1 MiB plus a few elements: past every chunk and pipeline boundary, and not a
// multiple of anything a backend might split by.
int64_t large_numel(DType dtype);

// Contents for data movement: element i of seed s, valid in dtype (bool 0/1).
Tensor pattern(DType dtype, int64_t numel, uint64_t seed);
// A seed per (rank, case): every rank's data differs from every other's.
uint64_t seed_of(int rank, uint64_t salt);
// Every element set to a value no pattern() produces often: for "unchanged" checks.
Tensor sentinel(DType dtype, const Shape& shape);

// What the public contract lets each reduce op apply to: avg floats only, bitwise
// ops integers and bool only. Sum and prod on bool are left out: the contract does
// not say what they mean.
bool reduce_applies(ReduceOp op, DType dtype);
const std::vector<ReduceOp>& all_reduce_ops();

// Rank `rank`'s operand of `op` (numel elements), for a group of world_size.
Tensor reduce_operand(ReduceOp op, DType dtype, int rank, int world_size, int64_t numel, uint64_t salt);
// The exact result of reducing every rank's reduce_operand with op.
Tensor reduce_reference(ReduceOp op, DType dtype, int world_size, int64_t numel, uint64_t salt);

// "all_reduce float32 x7 ws3" style labels for failure messages.
std::string label(const std::string& op, DType dtype, int64_t numel, int world_size);

}  // namespace thd::conformance
