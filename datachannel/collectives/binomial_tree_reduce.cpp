// Reduce for small buffers: the mirror of the binomial broadcast. Renumbered so
// the root is 0, rank v takes in the subtrees v + 1, v + 2, v + 4, ... (below its
// lowest set bit) and sends the result to v - lowbit(v). Operands are combined in
// a fixed order (v's range first), so the result does not depend on timing.
#include <cstring>

#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/float32_accumulation.h"
#include "datachannel/collectives/blocks.h"
#include "datachannel/collectives/reduce_kernels.h"

namespace thd::detail {

void binomial_tree_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root) {
  const int n = comm.size();
  const size_t nbytes = count * element_size(dtype);
  if (nbytes == 0) return;
  if (n > 1 && accumulates_in_float32(dtype, op)) {
    return reduce_in_float32(data, count, dtype, /*write_back=*/comm.rank() == root, [&](float* wide) {
      binomial_tree_reduce(comm, wide, count, DType::Float32, op, root);
    });
  }
  const int v = ring_index(comm.rank() - root, n);
  auto to_rank = [&](int virtual_rank) { return ring_index(virtual_rank + root, n); };
  const bool is_root = v == 0;

  // The root reduces in place; the others must leave their buffer alone and
  // reduce into scratch, and only when they have children to take in.
  Tensor scratch;
  uint8_t* incoming = nullptr;
  const uint8_t* acc_in = static_cast<const uint8_t*>(data);  // what we have reduced so far
  uint8_t* acc_out = is_root ? static_cast<uint8_t*>(data) : nullptr;

  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if (v & mask) break;
    if (v + mask >= n) continue;
    if (incoming == nullptr) {
      scratch = scratch_bytes(is_root ? nbytes : 2 * nbytes);
      incoming = bytes_of(scratch);
      if (!is_root) acc_out = incoming + nbytes;
    }
    comm.recv(span_of(incoming, nbytes), to_rank(v + mask));
    reduce_into(acc_out, acc_in, incoming, count, dtype, op);
    acc_in = acc_out;
  }
  if (is_root) {
    finish_reduce(data, count, dtype, op, n);
  } else {
    comm.send(span_of(acc_in, nbytes), to_rank(v - mask));
  }
}

}  // namespace thd::detail
