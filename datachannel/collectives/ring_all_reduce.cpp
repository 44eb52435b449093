// Ring all-reduce = ring reduce-scatter + ring all-gather over the same blocks
// (Patarasuk & Yuan; Baidu's and Horovod's ring, gloo's allreduce_ring_chunked):
// each rank sends 2 (n - 1) / n of the buffer whatever n is, so it is the choice
// for large buffers. Every block is reduced by exactly one sequence of ranks and
// then copied to the others, so every rank ends with the same bits.
#include <vector>

#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/float32_accumulation.h"
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
  // In place: the block received at step s is reduced into this rank's own copy.
  std::vector<uint8_t*> acc_by_step(static_cast<size_t>(n - 1));
  for (int s = 0; s < n - 1; ++s) {
    acc_by_step[static_cast<size_t>(s)] = bytes + layout.block_offset(ring_index(r - 2 - s, n));
  }
  ring_reduce_scatter_pass(comm, layout, bytes, acc_by_step, dtype, op);
  // Avg divides once, by the block's owner, before the copies go out.
  finish_reduce(bytes + layout.block_offset(r), layout.block_bytes(r) / elem, dtype, op, n);
  ring_all_gather_pass(comm, layout, bytes);
}

void ring_all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op) {
  ring_all_reduce(comm, data, count, dtype, op, kRingChunkBytes);
}

}  // namespace thd::detail
