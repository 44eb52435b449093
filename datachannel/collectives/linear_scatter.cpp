// Scatter: the root sends every rank its block directly, all sends posted at
// once (see linear_gather.cpp for why a tree would not help the root's link).
#include <cstring>
#include <vector>

#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/blocks.h"

namespace thd::detail {

void linear_scatter(Comm& comm, const void* in, void* out, size_t nbytes_per_rank, int root) {
  const int n = comm.size();
  const int r = comm.rank();
  if (nbytes_per_rank == 0) return;
  if (r != root) {
    comm.recv(span_of(out, nbytes_per_rank), root);
    return;
  }
  const auto* blocks = static_cast<const uint8_t*>(in);
  std::vector<Request> sends;
  sends.reserve(static_cast<size_t>(n));
  // Starting after the root spreads the first sends over different peers when
  // several roots scatter at once.
  for (int i = 1; i < n; ++i) {
    const int peer = ring_index(r + i, n);
    sends.push_back(comm.isend(span_of(blocks + static_cast<size_t>(peer) * nbytes_per_rank, nbytes_per_rank), peer));
  }
  const uint8_t* mine = blocks + static_cast<size_t>(r) * nbytes_per_rank;
  if (mine != out) std::memmove(out, mine, nbytes_per_rank);
  comm.wait_all(sends);
}

}  // namespace thd::detail
