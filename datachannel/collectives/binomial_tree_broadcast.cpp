// Broadcast for small buffers: a binomial tree rooted at the root, which reaches
// every rank in ceil(log2(n)) rounds of whole-buffer messages (latency-optimal).
// Ranks are renumbered so the root is 0: rank v receives from v - lowbit(v) and
// sends to v + 2^k for every 2^k below lowbit(v) (MPICH's MPIR_Bcast_binomial).
#include <vector>

#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/blocks.h"

namespace thd::detail {

void binomial_tree_broadcast(Comm& comm, void* data, size_t nbytes, int root) {
  const int n = comm.size();
  if (n == 1 || nbytes == 0) return;
  const int v = ring_index(comm.rank() - root, n);
  auto to_rank = [&](int virtual_rank) { return ring_index(virtual_rank + root, n); };
  const auto buffer = span_of(data, nbytes);

  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      comm.recv(buffer, to_rank(v - mask));
      break;
    }
    mask <<= 1;
  }
  // Children, the farthest (largest subtree) first.
  std::vector<Request> sends;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < n) sends.push_back(comm.isend(buffer, to_rank(v + mask)));
  }
  comm.wait_all(sends);
}

}  // namespace thd::detail
