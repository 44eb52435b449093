// One checked run of each DataChannel op: every rank calls the same check with
// the same arguments, each builds its own input, runs the op and compares what it
// got with a reference computed here. A difference throws ConformanceFailure, so
// the checks run the same on rank threads and in rank processes.
#pragma once

#include <cstdint>

#include <thd/datachannel.h>

namespace thd::conformance {

// Point to point over the ring r -> r+1 (nothing at world size 1): tensors
// (received into a tensor of another shape, which the contract allows) and bytes.
void check_send_recv_ring(DataChannel& dc, DType dtype, int64_t numel, int64_t tag, uint64_t salt);
void check_bytes_ring(DataChannel& dc, size_t nbytes, int64_t tag, uint64_t salt);
// Every rank but 0 sends to rank 0, which receives from kAnySource and must be
// told each sender once, with that sender's data.
void check_any_source(DataChannel& dc, int64_t tag, uint64_t salt);

void check_broadcast(DataChannel& dc, DType dtype, int64_t numel, int root, uint64_t salt);
void check_all_reduce(DataChannel& dc, DType dtype, int64_t numel, ReduceOp op, uint64_t salt);
void check_reduce(DataChannel& dc, DType dtype, int64_t numel, int root, ReduceOp op, uint64_t salt);
void check_all_gather(DataChannel& dc, DType dtype, int64_t numel, uint64_t salt);
void check_reduce_scatter(DataChannel& dc, DType dtype, int64_t block, ReduceOp op, uint64_t salt);
// undefined_elsewhere: ranks other than root pass an undefined output (gather) or
// input (scatter), as the contract allows; otherwise a defined one that must be
// left alone.
void check_gather(DataChannel& dc, DType dtype, int64_t numel, int root, bool undefined_elsewhere, uint64_t salt);
void check_scatter(DataChannel& dc, DType dtype, int64_t numel, int root, bool undefined_elsewhere, uint64_t salt);
void check_all_to_all(DataChannel& dc, DType dtype, int64_t block, uint64_t salt);

// Each op once or twice at small sizes, roots 0 and last: the smoke test both
// harnesses run.
void exercise_every_op(DataChannel& dc, uint64_t salt);

}  // namespace thd::conformance
