// Ring all-reduce = ring reduce-scatter + ring all-gather over the same blocks
// (Patarasuk & Yuan; Baidu's and Horovod's ring, gloo's allreduce_ring_chunked):
// each rank sends 2 (n - 1) / n of the buffer whatever n is, so it is the choice
// for large buffers. Every block is reduced by exactly one sequence of ranks and
// then copied to the others, so every rank ends with the same bits.
//
// Both halves run as one pipeline of 2 (n - 1) steps: the all-gather's first
// chunk leaves as soon as the reduce-scatter's last step has reduced it, with no
// pause between the halves, and its receives are posted while the reduce-scatter
// still runs, so no chunk arrives before its receive (ring.h, ring_recv_depth).
#include <vector>

#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/float32_accumulation.h"
#include "datachannel/collectives/pipeline.h"
#include "datachannel/collectives/reduce_kernels.h"
#include "datachannel/collectives/ring.h"

namespace thd::detail {

void ring_all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, size_t chunk_bytes) {
  const int n = comm.size();
  const int r = comm.rank();
  if (count == 0) return;
  auto* bytes = static_cast<uint8_t*>(data);
  if (n == 1) {
    finish_reduce(data, count, dtype, op, n);
    return;
  }
  if (accumulates_in_float32(dtype, op)) {
    return reduce_in_float32(data, count, dtype, /*write_back=*/true, [&](float* wide) {
      ring_all_reduce(comm, wide, count, DType::Float32, op, chunk_bytes);
    });
  }
  const size_t elem = element_size(dtype);
  const BlockLayout layout(count, elem, n, chunk_bytes);
  const size_t chunks = layout.chunks();
  const size_t slot_bytes = layout.largest_chunk_bytes();
  const int steps = 2 * (n - 1);
  const size_t items = static_cast<size_t>(steps) * chunks;
  const size_t depth = ring_recv_depth(n, items, slot_bytes);
  // Reduce-scatter chunks land in these slots and are reduced into this rank's
  // own copy (in place); all-gather chunks land in place.
  Tensor slots_storage = scratch_bytes(slot_bytes * depth);
  uint8_t* slots = bytes_of(slots_storage);

  // Item j is chunk j % chunks of step j / chunks. Steps 0 .. n - 2 reduce-scatter:
  // step s sends block r - 1 - s and receives block r - 2 - s, so step n - 2 ends
  // with block r reduced. Steps n - 1 .. 2n - 3 all-gather: step n - 1 + t sends
  // block r - t and receives block r - 1 - t. Either way step s sends what step
  // s - 1 received, hence one lag of `chunks` items for the whole pipeline.
  auto step_of = [&](size_t j) { return static_cast<int>(j / chunks); };
  auto reduces = [&](int s) { return s < n - 1; };
  auto send_block = [&](int s) { return reduces(s) ? ring_index(r - 1 - s, n) : ring_index(r - (s - (n - 1)), n); };
  auto recv_block = [&](int s) { return reduces(s) ? ring_index(r - 2 - s, n) : ring_index(r - 1 - (s - (n - 1)), n); };
  auto chunk_at = [&](int b, size_t k) { return bytes + layout.block_offset(b) + layout.chunk_offset(b, k); };

  PipelineShape shape;
  shape.items = items;
  shape.send_to = ring_index(r + 1, n);
  shape.recv_from = ring_index(r - 1, n);
  shape.send_lag = chunks;
  shape.recv_depth = depth;
  shape.send_window = kRingSendWindow;

  run_pipeline(
      comm, shape,
      [&](size_t j) {
        const int b = send_block(step_of(j));
        const size_t k = j % chunks;
        return std::span<const uint8_t>(chunk_at(b, k), layout.chunk_bytes(b, k));
      },
      [&](size_t j, size_t slot) {
        const int s = step_of(j);
        const int b = recv_block(s);
        const size_t k = j % chunks;
        uint8_t* into = reduces(s) ? slots + slot * slot_bytes : chunk_at(b, k);
        return std::span<uint8_t>(into, layout.chunk_bytes(b, k));
      },
      [&](size_t j, size_t slot) {
        const int s = step_of(j);
        if (!reduces(s)) return;
        const int b = recv_block(s);
        const size_t k = j % chunks;
        const size_t count_k = layout.chunk_bytes(b, k) / elem;
        uint8_t* acc = chunk_at(b, k);
        reduce_into(acc, slots + slot * slot_bytes, count_k, dtype, op);
        // Avg divides once, by the block's owner, before the chunk goes out again.
        if (s == n - 2) finish_reduce(acc, count_k, dtype, op, n);
      });
}

void ring_all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op) {
  ring_all_reduce(comm, data, count, dtype, op, kRingChunkBytes);
}

}  // namespace thd::detail
