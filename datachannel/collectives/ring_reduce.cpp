// Reduce for large buffers: ring reduce-scatter, then every rank sends its
// reduced block to the root. Each rank sends about (n - 1) / n + 1 / n of the
// buffer, where a binomial tree makes the root take in log2(n) whole buffers.
#include <vector>

#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/float32_accumulation.h"
#include "datachannel/collectives/reduce_kernels.h"
#include "datachannel/collectives/ring.h"

namespace thd::detail {

void ring_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root, size_t chunk_bytes) {
  const int n = comm.size();
  const int r = comm.rank();
  if (count == 0) return;
  if (n == 1) {
    finish_reduce(data, count, dtype, op, n);
    return;
  }
  if (accumulates_in_float32(dtype, op)) {
    return reduce_in_float32(data, count, dtype, /*write_back=*/r == root, [&](float* wide) {
      ring_reduce(comm, wide, count, DType::Float32, op, root, chunk_bytes);
    });
  }
  const size_t elem = element_size(dtype);
  const BlockLayout layout(count, elem, n, chunk_bytes);
  auto* bytes = static_cast<uint8_t*>(data);
  // Only the root's buffer may change: the others reduce into scratch.
  Tensor scratch = r == root ? Tensor() : scratch_bytes(count * elem);
  uint8_t* acc = r == root ? bytes : bytes_of(scratch);
  std::vector<uint8_t*> acc_by_step(static_cast<size_t>(n - 1));
  for (int s = 0; s < n - 1; ++s) {
    acc_by_step[static_cast<size_t>(s)] = acc + layout.block_offset(ring_index(r - 2 - s, n));
  }
  ring_reduce_scatter_pass(comm, layout, bytes, acc_by_step, dtype, op);

  uint8_t* mine = acc + layout.block_offset(r);
  finish_reduce(mine, layout.block_bytes(r) / elem, dtype, op, n);
  if (r != root) {
    if (layout.block_bytes(r) > 0) comm.send(span_of(mine, layout.block_bytes(r)), root);
    return;
  }
  std::vector<Request> blocks;
  blocks.reserve(static_cast<size_t>(n));
  for (int b = 0; b < n; ++b) {
    if (b == root || layout.block_bytes(b) == 0) continue;
    blocks.push_back(comm.irecv(span_of(bytes + layout.block_offset(b), layout.block_bytes(b)), b));
  }
  comm.wait_all(blocks);
}

void ring_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root) {
  ring_reduce(comm, data, count, dtype, op, root, kRingChunkBytes);
}

}  // namespace thd::detail
