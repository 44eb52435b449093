// Ring reduce-scatter: n - 1 steps, each moving one block per rank to the next
// rank, which reduces it into its own contribution and passes it on; every block
// is chunked so a step's reduction overlaps the transfer of its next chunk.
// Bandwidth-optimal: each rank sends (n - 1) / n of the buffer.
#include <cstring>
#include <vector>

#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/float32_accumulation.h"
#include "datachannel/collectives/pipeline.h"
#include "datachannel/collectives/reduce_kernels.h"
#include "datachannel/collectives/ring.h"

namespace thd::detail {

void ring_reduce_scatter_pass(Comm& comm, const BlockLayout& layout, const uint8_t* in,
                              std::span<uint8_t* const> acc_by_step, DType dtype, ReduceOp op) {
  const int n = comm.size();
  const int r = comm.rank();
  if (n == 1) return;
  const size_t chunks = layout.chunks();
  const size_t slot_bytes = layout.largest_chunk_bytes();
  if (slot_bytes == 0) return;  // nothing to move
  const size_t items = static_cast<size_t>(n - 1) * chunks;
  const size_t depth = ring_recv_depth(n, items, slot_bytes);
  Tensor slots_storage = scratch_bytes(slot_bytes * depth);
  uint8_t* slots = bytes_of(slots_storage);
  const size_t elem = layout.elem();

  // Item j is chunk j % chunks of step j / chunks.
  auto step_of = [&](size_t j) { return static_cast<int>(j / chunks); };
  auto send_block = [&](int s) { return ring_index(r - 1 - s, n); };
  auto recv_block = [&](int s) { return ring_index(r - 2 - s, n); };

  PipelineShape shape;
  shape.items = items;
  shape.send_to = ring_index(r + 1, n);
  shape.recv_from = ring_index(r - 1, n);
  shape.send_lag = chunks;  // step s sends what step s - 1 reduced
  shape.recv_depth = depth;
  shape.send_window = kRingSendWindow;

  run_pipeline(
      comm, shape,
      [&](size_t j) {
        const int s = step_of(j);
        const size_t k = j % chunks;
        const int b = send_block(s);
        const uint8_t* block = s == 0 ? in + layout.block_offset(b) : acc_by_step[static_cast<size_t>(s - 1)];
        return std::span<const uint8_t>(block + layout.chunk_offset(b, k), layout.chunk_bytes(b, k));
      },
      [&](size_t j, size_t slot) {
        const int b = recv_block(step_of(j));
        return std::span<uint8_t>(slots + slot * slot_bytes, layout.chunk_bytes(b, j % chunks));
      },
      [&](size_t j, size_t slot) {
        const int s = step_of(j);
        const size_t k = j % chunks;
        const int b = recv_block(s);
        const size_t at = layout.chunk_offset(b, k);
        reduce_into(acc_by_step[static_cast<size_t>(s)] + at, in + layout.block_offset(b) + at,
                    slots + slot * slot_bytes, layout.chunk_bytes(b, k) / elem, dtype, op);
      });
}

void ring_reduce_scatter(Comm& comm, const void* in, void* out, size_t count_per_rank, DType dtype, ReduceOp op,
                         size_t chunk_bytes) {
  const int n = comm.size();
  const size_t elem = element_size(dtype);
  const size_t block_bytes = count_per_rank * elem;
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  if (block_bytes == 0) return;
  if (n > 1 && accumulates_in_float32(dtype, op)) {
    const size_t in_count = count_per_rank * static_cast<size_t>(n);
    return reduce_in_float32(in, in_count, out, count_per_rank, dtype, [&](const float* wide_in, float* wide_out) {
      ring_reduce_scatter(comm, wide_in, wide_out, count_per_rank, DType::Float32, op, chunk_bytes);
    });
  }
  if (n == 1) {
    if (src != dst) std::memmove(dst, src, block_bytes);
  } else {
    const BlockLayout layout(count_per_rank * static_cast<size_t>(n), elem, n, chunk_bytes);
    // Partial sums of the steps before the last live in scratch; the last step
    // reduces straight into out.
    Tensor work = n > 2 ? scratch_bytes(block_bytes * static_cast<size_t>(n - 2)) : Tensor();
    std::vector<uint8_t*> acc_by_step(static_cast<size_t>(n - 1));
    for (int s = 0; s + 1 < n - 1; ++s) acc_by_step[static_cast<size_t>(s)] = bytes_of(work) + s * block_bytes;
    acc_by_step.back() = dst;
    ring_reduce_scatter_pass(comm, layout, src, acc_by_step, dtype, op);
  }
  finish_reduce(dst, count_per_rank, dtype, op, n);
}

void ring_reduce_scatter(Comm& comm, const void* in, void* out, size_t count_per_rank, DType dtype, ReduceOp op) {
  ring_reduce_scatter(comm, in, out, count_per_rank, dtype, op, kRingChunkBytes);
}

}  // namespace thd::detail
