// The ring passes that ring all_reduce, reduce_scatter, all_gather and reduce
// are made of, and the algorithms with their chunk size as a parameter (the tests
// use small chunks to run long pipelines on small buffers).
#pragma once

#include <thd/datachannel.h>
#include <thd/dtype.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "datachannel/collectives/blocks.h"
#include "datachannel/collectives/comm.h"

namespace thd::detail {

// Big enough that the per-message cost (a request, a header, a wakeup) is well
// under 1% of a chunk's transfer, small enough that a step's first chunk is
// reduced while the rest still travel and that the scratch slots stay in L2.
// Over the in-process transport (64 MiB float32, 4 ranks) 256 KiB .. 2 MiB are
// within noise of each other and 64 KiB is ~25% slower (per-message overhead);
// 512 KiB sits in the middle of that plateau.
inline constexpr size_t kRingChunkBytes = 512 * 1024;
// How far a rank's sends may run ahead of its own reductions (items).
inline constexpr size_t kRingSendWindow = 2;
// The most scratch a ring pass takes for receives posted ahead.
inline constexpr size_t kRingScratchMaxBytes = size_t{16} << 20;

// Receives a ring pass posts ahead of the one it consumes next. Rank r consumes
// only what r - 1 sent, and r - 1 sends at most kRingSendWindow items past its own
// consumption, so around a ring of n a rank leads its successor by at most
// (n - 1) windows; with n windows of receives posted, every chunk past a rank's
// first round of receives finds its receive waiting and none arrives unexpected
// (which would cost the receiver a buffer, its page faults and a copy). Capped by the items there are and by
// kRingScratchMaxBytes of slots of slot_bytes (large groups may then see a few
// unexpected chunks, correctly, at that cost).
inline size_t ring_recv_depth(int group_size, size_t items, size_t slot_bytes) {
  const size_t ahead = static_cast<size_t>(group_size) * kRingSendWindow;
  const size_t fit = slot_bytes == 0 ? ahead : std::max<size_t>(kRingSendWindow, kRingScratchMaxBytes / slot_bytes);
  return std::max<size_t>(1, std::min({items, ahead, fit}));
}

// Reduce-scatter over layout's blocks, with the ring order rank r -> r + 1. At
// step s (0 .. size() - 2) this rank sends block r - 1 - s and receives block
// r - 2 - s, so it ends holding block r. `in` is this rank's contribution to
// every block (the whole buffer); acc_by_step[s] is where the block received at
// step s is reduced into (in op received), so acc_by_step[size() - 2] ends as
// this rank's fully reduced block. acc_by_step may point into `in` (in place).
// Avg accumulates as Sum; the caller finishes it.
void ring_reduce_scatter_pass(Comm& comm, const BlockLayout& layout, const uint8_t* in,
                              std::span<uint8_t* const> acc_by_step, DType dtype, ReduceOp op);

// All-gather in place over `data` laid out as `layout`: this rank's block is in
// place before, every block after.
void ring_all_gather_pass(Comm& comm, const BlockLayout& layout, uint8_t* data);

void ring_all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, size_t chunk_bytes);
void ring_reduce_scatter(Comm& comm, const void* in, void* out, size_t count_per_rank, DType dtype, ReduceOp op,
                         size_t chunk_bytes);
void ring_all_gather(Comm& comm, const void* in, void* out, size_t nbytes_per_rank, size_t chunk_bytes);
void ring_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root, size_t chunk_bytes);
void pipelined_ring_broadcast(Comm& comm, void* data, size_t nbytes, int root, size_t chunk_bytes);

}  // namespace thd::detail
