// Gather: every rank sends its block straight to the root, which posts all the
// receives at once into their places in the output. The root's link carries
// the (n - 1) blocks whatever the shape of the exchange, so a tree would only add
// hops; what matters is that every receive is posted before the data arrives.
#include <cstring>
#include <vector>

#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/blocks.h"

namespace thd::detail {

void linear_gather(Comm& comm, const void* in, void* out, size_t nbytes_per_rank, int root) {
  const int n = comm.size();
  const int r = comm.rank();
  if (nbytes_per_rank == 0) return;
  if (r != root) {
    comm.send(span_of(in, nbytes_per_rank), root);
    return;
  }
  auto* blocks = static_cast<uint8_t*>(out);
  std::vector<Request> receives;
  receives.reserve(static_cast<size_t>(n));
  for (int peer = 0; peer < n; ++peer) {
    if (peer == r) continue;
    receives.push_back(
        comm.irecv(span_of(blocks + static_cast<size_t>(peer) * nbytes_per_rank, nbytes_per_rank), peer));
  }
  uint8_t* mine = blocks + static_cast<size_t>(r) * nbytes_per_rank;
  if (in != mine) std::memmove(mine, in, nbytes_per_rank);
  comm.wait_all(receives);
}

}  // namespace thd::detail
