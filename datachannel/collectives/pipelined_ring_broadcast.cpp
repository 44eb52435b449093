// Broadcast for large buffers: the ranks form a chain from the root (root,
// root + 1, ...) and the buffer flows down it in chunks, each rank forwarding a
// chunk as soon as it has landed. Every link carries the buffer once, so the time
// is about one buffer's transfer plus (n - 2) chunks', where a binomial tree
// takes log2(n) whole transfers.
#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/pipeline.h"
#include "datachannel/collectives/ring.h"

namespace thd::detail {

void pipelined_ring_broadcast(Comm& comm, void* data, size_t nbytes, int root, size_t chunk_bytes) {
  const int n = comm.size();
  const int r = comm.rank();
  if (n == 1 || nbytes == 0) return;
  const int position = ring_index(r - root, n);  // along the chain
  const Split chunks{nbytes, std::max<size_t>(1, (nbytes + chunk_bytes - 1) / std::max<size_t>(chunk_bytes, 1))};
  auto* bytes = static_cast<uint8_t*>(data);

  PipelineShape shape;
  shape.items = chunks.parts;
  shape.recv_from = position > 0 ? ring_index(r - 1, n) : -1;
  shape.send_to = position < n - 1 ? ring_index(r + 1, n) : -1;
  shape.send_lag = 0;               // forward a chunk once it has landed
  shape.recv_depth = chunks.parts;  // chunks land in place: post them all
  shape.send_window = chunks.parts;

  auto chunk = [&](size_t j) { return std::span<uint8_t>(bytes + chunks.begin(j), chunks.size(j)); };
  run_pipeline(
      comm, shape,
      [&](size_t j) {
        auto c = chunk(j);
        return std::span<const uint8_t>(c.data(), c.size());
      },
      [&](size_t j, size_t) { return chunk(j); }, [](size_t, size_t) {});
}

void pipelined_ring_broadcast(Comm& comm, void* data, size_t nbytes, int root) {
  pipelined_ring_broadcast(comm, data, nbytes, root, kRingChunkBytes);
}

}  // namespace thd::detail
