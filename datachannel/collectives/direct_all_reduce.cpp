// All-reduce with a word beside each member's data (runtime_queries.h): every
// member sends [word | data] to every other one and reduces what it received on
// its own. One message latency instead of recursive doubling's rounds, for
// (n - 1) messages per member instead of about log2(n): the better trade for the
// small buffers and small groups it is used for.
//
// The local reduction combines the buffers in the very order recursive doubling
// does (recursive_doubling_all_reduce.cpp): the extra ranks of a group that is not
// a power of two fold into their odd neighbours (lower rank first), then a balanced
// binary tree over the power-of-two participants, lower operand first at every
// node. Floating-point sums depend on that order; following it makes the result
// the same bits as the DataChannel's all_reduce of the same buffers.
#include <bit>
#include <cstring>
#include <vector>

#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/blocks.h"
#include "datachannel/collectives/reduce_kernels.h"

namespace thd::detail {

void flagged_direct_all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int64_t word,
                               int64_t* words) {
  const int n = comm.size();
  const int r = comm.rank();
  const size_t nbytes = count * element_size(dtype);
  const size_t frame = sizeof(int64_t) + nbytes;
  Tensor scratch = scratch_bytes(frame * static_cast<size_t>(n));
  uint8_t* base = bytes_of(scratch);
  auto slot = [&](int rank) { return base + frame * static_cast<size_t>(rank); };
  std::memcpy(slot(r), &word, sizeof word);
  if (nbytes != 0) std::memcpy(slot(r) + sizeof word, data, nbytes);

  std::vector<Request> requests;
  requests.reserve(2 * static_cast<size_t>(n - 1));
  for (int p = 0; p < n; ++p) {
    if (p != r) requests.push_back(comm.irecv(span_of(slot(p), frame), p));
  }
  for (int p = 0; p < n; ++p) {
    if (p != r) requests.push_back(comm.isend(span_of(static_cast<const void*>(slot(r)), frame), p));
  }
  comm.wait_all(requests);

  bool any = false;
  for (int p = 0; p < n; ++p) {
    std::memcpy(&words[p], slot(p), sizeof(int64_t));
    any = any || words[p] != 0;
  }
  if (any || nbytes == 0) return;  // a member cannot take part: the data stays as it was

  auto buffer = [&](int rank) { return static_cast<void*>(slot(rank) + sizeof(int64_t)); };
  const int pof2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int extra = n - pof2;
  // The value each power-of-two participant starts the doubling rounds with.
  std::vector<void*> value(static_cast<size_t>(pof2));
  for (int d = 0; d < pof2; ++d) {
    if (d < extra) {
      reduce_into(buffer(2 * d + 1), buffer(2 * d), buffer(2 * d + 1), count, dtype, op);
      value[static_cast<size_t>(d)] = buffer(2 * d + 1);
    } else {
      value[static_cast<size_t>(d)] = buffer(d + extra);
    }
  }
  for (int step = 1; step < pof2; step <<= 1) {
    for (int d = 0; d + step < pof2; d += 2 * step) {
      void* low = value[static_cast<size_t>(d)];
      reduce_into(low, low, value[static_cast<size_t>(d + step)], count, dtype, op);
    }
  }
  std::memcpy(data, value[0], nbytes);
  finish_reduce(data, count, dtype, op, n);
}

}  // namespace thd::detail
