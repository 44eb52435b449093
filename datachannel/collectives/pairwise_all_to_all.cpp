// All-to-all: n - 1 rounds; in round k every rank sends to rank + k and receives
// from rank - k, so each round is a permutation: every link carries one block
// and no rank is the target of more than one sender at a time (MPICH's
// pairwise exchange for long messages).
#include <cstring>

#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/blocks.h"

namespace thd::detail {

void pairwise_all_to_all(Comm& comm, const void* in, void* out, size_t nbytes_per_rank) {
  const int n = comm.size();
  const int r = comm.rank();
  if (nbytes_per_rank == 0) return;
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  auto block = [&](auto* base, int i) { return base + static_cast<size_t>(i) * nbytes_per_rank; };
  std::memmove(block(dst, r), block(src, r), nbytes_per_rank);
  for (int k = 1; k < n; ++k) {
    const int to = ring_index(r + k, n);
    const int from = ring_index(r - k, n);
    comm.sendrecv(span_of(block(src, to), nbytes_per_rank), to, span_of(block(dst, from), nbytes_per_rank), from);
  }
}

}  // namespace thd::detail
