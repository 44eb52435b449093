// All-reduce for small buffers: recursive doubling, log2(n) rounds in which
// partners exchange whole buffers and both reduce (latency-optimal). A group
// that is not a power of two first folds its extra ranks in: of the first
// 2 * extra ranks, each even one hands its buffer to the odd one above and waits
// for the result (Thakur, Rabenseifner & Gropp, "Optimization of collective
// communication operations in MPICH", 2005).
//
// Both partners of a round compute lower-rank operand op higher-rank operand, so
// they hold the same bits afterwards, and by induction every rank ends with the
// same bits even for floating point and NaN payloads.
#include <bit>

#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/float32_accumulation.h"
#include "datachannel/collectives/blocks.h"
#include "datachannel/collectives/reduce_kernels.h"

namespace thd::detail {

void recursive_doubling_all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op) {
  const int n = comm.size();
  const int r = comm.rank();
  const size_t nbytes = count * element_size(dtype);
  if (nbytes == 0) return;
  if (n == 1) {
    finish_reduce(data, count, dtype, op, n);
    return;
  }
  if (accumulates_in_float32(dtype, op)) {
    return reduce_in_float32(data, count, dtype, /*write_back=*/true, [&](float* wide) {
      recursive_doubling_all_reduce(comm, wide, count, DType::Float32, op);
    });
  }
  const int pof2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int extra = n - pof2;
  Tensor scratch = scratch_bytes(nbytes);
  uint8_t* incoming = bytes_of(scratch);
  auto* mine = static_cast<uint8_t*>(data);
  const auto buffer = span_of(data, nbytes);
  const auto in_buffer = span_of(incoming, nbytes);

  // Fold in: the extra ranks' buffers go to an odd neighbour, which stands for both.
  int doubling_rank = -1;  // rank among the power-of-two participants
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      comm.send(buffer, r + 1);
    } else {
      comm.recv(in_buffer, r - 1);
      reduce_into(mine, incoming, mine, count, dtype, op);  // lower rank's first
      doubling_rank = r / 2;
    }
  } else {
    doubling_rank = r - extra;
  }

  if (doubling_rank >= 0) {
    for (int mask = 1; mask < pof2; mask <<= 1) {
      const int partner_doubling = doubling_rank ^ mask;
      const int partner = partner_doubling < extra ? partner_doubling * 2 + 1 : partner_doubling + extra;
      comm.sendrecv(buffer, partner, in_buffer, partner);
      if (partner < r) {
        reduce_into(mine, incoming, mine, count, dtype, op);
      } else {
        reduce_into(mine, mine, incoming, count, dtype, op);
      }
    }
  }

  // Fold out: the odd neighbours hand the result back.
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      comm.recv(buffer, r + 1);
      return;  // already finished by the neighbour
    }
    finish_reduce(data, count, dtype, op, n);
    comm.send(buffer, r - 1);
    return;
  }
  finish_reduce(data, count, dtype, op, n);
}

}  // namespace thd::detail
