// The collective algorithms, written once over point-to-point (Comm) so every
// backend has them. Buffers are contiguous host memory; every member of the group
// calls the same entry point with the same sizes, dtype, op and root (the
// envelope checks that). The entry points pick an algorithm by size and group
// size (select.cpp; docs/datachannel.md says which and why); the algorithms are
// also callable directly, for tests and benchmarks.
#pragma once

#include <thd/datachannel.h>
#include <thd/dtype.h>

#include <cstddef>
#include <cstdint>

#include "datachannel/collectives/comm.h"

namespace thd::detail {

// ---- entry points ---------------------------------------------------------------
// In place over `count` elements; Avg divides by the group size at the end.
void all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op);
// root's nbytes copied to everyone's.
void broadcast(Comm& comm, void* data, size_t nbytes, int root);
// In place; only root's data changes.
void reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root);
// out holds size() * nbytes_per_rank: rank r's input at offset r * nbytes_per_rank.
void all_gather(Comm& comm, const void* in, void* out, size_t nbytes_per_rank);
// in holds size() blocks of count_per_rank; out gets the reduction of block rank().
void reduce_scatter(Comm& comm, const void* in, void* out, size_t count_per_rank, DType dtype, ReduceOp op);
// out (root only; nullptr elsewhere) as all_gather's.
void gather(Comm& comm, const void* in, void* out, size_t nbytes_per_rank, int root);
// in (root only; nullptr elsewhere) holds size() blocks; out gets block rank().
void scatter(Comm& comm, const void* in, void* out, size_t nbytes_per_rank, int root);
// Block j of in goes to rank j, which stores it as its block rank().
void all_to_all(Comm& comm, const void* in, void* out, size_t nbytes_per_rank);
void barrier(Comm& comm);

// ---- the algorithms ---------------------------------------------------------------
// Each is complete on its own (Avg included) and handles any group size and count;
// float16 and bfloat16 sums, averages and products accumulate in float32
// (float32_accumulation.h).
void ring_all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op);
void recursive_doubling_all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op);
void binomial_tree_broadcast(Comm& comm, void* data, size_t nbytes, int root);
void pipelined_ring_broadcast(Comm& comm, void* data, size_t nbytes, int root);
void binomial_tree_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root);
void ring_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root);
void ring_all_gather(Comm& comm, const void* in, void* out, size_t nbytes_per_rank);
void ring_reduce_scatter(Comm& comm, const void* in, void* out, size_t count_per_rank, DType dtype, ReduceOp op);
void linear_gather(Comm& comm, const void* in, void* out, size_t nbytes_per_rank, int root);
void linear_scatter(Comm& comm, const void* in, void* out, size_t nbytes_per_rank, int root);
void pairwise_all_to_all(Comm& comm, const void* in, void* out, size_t nbytes_per_rank);
void dissemination_barrier(Comm& comm);
// Every member's [word | data] to every other one, reduced locally in recursive
// doubling's order (the same bits as recursive_doubling_all_reduce); `words` gets
// every member's word in rank order, and `data` changes only when all are 0. No
// float32 widening: the caller passes a dtype that needs none.
void flagged_direct_all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int64_t word,
                               int64_t* words);
// The same result through group rank 0: every member sends [word | data] to it, and
// it sends [every word | the reduction] back (runtime_queries.h).
void flagged_rooted_all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int64_t word,
                               int64_t* words);

}  // namespace thd::detail
