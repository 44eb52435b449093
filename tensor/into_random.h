// rand, randn and randint drawn into an existing tensor (a contiguous CPU tensor of
// the op's shape and dtype): the same draws as the allocating op, and the generator
// advances by the same count, so a stream of ops gives the same values whether its
// results are new tensors or kept ones. For a caller that keeps a result's storage
// from one run of an op to the next (a worker's graph replays, docs/graphs.md).
//
// Each returns true when it drew into `out`, and false, with nothing drawn and the
// generator untouched, for anything else: the caller then runs the op as usual.
// randint raises its error for a range the dtype cannot hold.
#pragma once

#include <cstdint>

#include <thd/generator.h>
#include <thd/tensor.h>

namespace thd::detail {

bool rand_into(const Tensor& out, const Shape& shape, DType dtype, Generator* gen);
bool randn_into(const Tensor& out, const Shape& shape, DType dtype, Generator* gen);
bool randint_into(const Tensor& out, int64_t low, int64_t high, const Shape& shape, DType dtype, Generator* gen);

}  // namespace thd::detail
