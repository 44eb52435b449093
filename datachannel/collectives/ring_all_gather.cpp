// Ring all-gather: n - 1 steps, each passing to the next rank the block received
// in the step before (its own block first), chunked so a block is forwarded
// chunk by chunk as it lands. Each rank sends (n - 1) / n of the output.
#include <cstring>

#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/pipeline.h"
#include "datachannel/collectives/ring.h"

namespace thd::detail {

void ring_all_gather_pass(Comm& comm, const BlockLayout& layout, uint8_t* data) {
  const int n = comm.size();
  const int r = comm.rank();
  if (n == 1) return;
  const size_t chunks = layout.chunks();

  PipelineShape shape;
  shape.items = static_cast<size_t>(n - 1) * chunks;
  shape.send_to = ring_index(r + 1, n);
  shape.recv_from = ring_index(r - 1, n);
  shape.send_lag = chunks;  // step s forwards the block step s - 1 received
  // Receives land in place, so depth costs no scratch: all of them are posted at
  // once, and no chunk can arrive before its receive.
  shape.recv_depth = shape.items;
  shape.send_window = shape.items;

  // Step s sends block r - s and receives block r - 1 - s.
  auto chunk = [&](int b, size_t k) {
    return std::span<uint8_t>(data + layout.block_offset(b) + layout.chunk_offset(b, k), layout.chunk_bytes(b, k));
  };
  run_pipeline(
      comm, shape,
      [&](size_t j) {
        const int s = static_cast<int>(j / chunks);
        auto c = chunk(ring_index(r - s, n), j % chunks);
        return std::span<const uint8_t>(c.data(), c.size());
      },
      [&](size_t j, size_t) { return chunk(ring_index(r - 1 - static_cast<int>(j / chunks), n), j % chunks); },
      [](size_t, size_t) {});
}

void ring_all_gather(Comm& comm, const void* in, void* out, size_t nbytes_per_rank, size_t chunk_bytes) {
  if (nbytes_per_rank == 0) return;
  const int n = comm.size();
  auto* data = static_cast<uint8_t*>(out);
  uint8_t* mine = data + static_cast<size_t>(comm.rank()) * nbytes_per_rank;
  if (in != mine) std::memmove(mine, in, nbytes_per_rank);
  ring_all_gather_pass(comm, BlockLayout(nbytes_per_rank * static_cast<size_t>(n), 1, n, chunk_bytes), data);
}

void ring_all_gather(Comm& comm, const void* in, void* out, size_t nbytes_per_rank) {
  ring_all_gather(comm, in, out, nbytes_per_rank, kRingChunkBytes);
}

}  // namespace thd::detail
