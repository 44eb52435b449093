// Barrier: the dissemination algorithm (Hensgen, Finkel & Manber, 1988). In
// round k every rank signals rank + 2^k and waits for rank - 2^k; after
// ceil(log2(n)) rounds every rank has heard, directly or not, from every other,
// for any n (no power-of-two padding as in a tree barrier).
#include <array>

#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/blocks.h"

namespace thd::detail {

void dissemination_barrier(Comm& comm) {
  const int n = comm.size();
  const int r = comm.rank();
  // One byte rather than none, so no transport has to special-case empty messages.
  const std::array<uint8_t, 1> token{1};
  std::array<uint8_t, 1> heard{0};
  for (int distance = 1; distance < n; distance <<= 1) {
    comm.sendrecv(token, ring_index(r + distance, n), heard, ring_index(r - distance, n));
  }
}

}  // namespace thd::detail
