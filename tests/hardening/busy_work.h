// Work that keeps a worker provably busy, and the statistics that prove it: a test
// kills a worker "during" an operation only once thd::stats() shows the worker is
// inside it, never after a blind sleep.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include <thd/distributed.h>
#include <thd/stream.h>

namespace thd::test {

// `count` matmuls of n x n float32 tensors on the current node and stream, each
// depending on the one before (about 15 ms each at the default size on one core of
// the CI machine, 1 ms at 256): issued, not waited for. The result is the last one.
DistributedTensor queue_matmuls(int count, int64_t n = 512);

// What `stream` of a node holds queued (its running op included); 0 when the
// node's statistics do not list it.
uint64_t queued_on(const NodeStats& node, const Stream& stream);

// Polls thd::stats() (every node answers; none may be stopped) until `ready`
// holds; false when it still does not at the deadline.
bool poll_stats(const std::function<bool(const std::vector<NodeStats>&)>& ready, std::chrono::milliseconds within);

}  // namespace thd::test
