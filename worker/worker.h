// A worker node: serves master sessions over a DataChannel (docs/master-worker.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include <thd/datachannel.h>

namespace thd::worker {

enum class SessionEnd {
  Goodbye,     // the master ended the session (thd::shutdown)
  MasterLost,  // the master's connection broke (it died or exited without shutdown)
  Refused,     // the master's HELLO did not fit (protocol version, node count)
};

// What one session may make a node allocate. A command whose new tensors would take
// this process's tensor memory (thd::memory_stats) past `memory_bytes`, or that
// would make a view larger than that, fails with an error reply before anything is
// allocated or read: a shape from a corrupt or hostile master cannot take the node
// down, nor tie it up for hours walking a view of 2^40 elements. Tensors on a GPU
// count against `device_memory_bytes` of that GPU (thd::memory_stats(cuda(i))).
struct SessionLimits {
  // 0: the machine's physical memory.
  size_t memory_bytes = 0;
  // Per GPU; 0: the GPU's own memory.
  size_t device_memory_bytes = 0;
};

// Serves one master session: `channel` is the session's world, the master is rank
// 0 and this worker is node channel->rank() - 1. Returns when the session ends; every
// tensor of the session is freed by then. Never throws for what the master sends
// (bad batches get error replies); throws only when the channel itself cannot work.
SessionEnd serve(const std::shared_ptr<DataChannel>& channel, const SessionLimits& limits = {});

const char* session_end_name(SessionEnd end);

}  // namespace thd::worker
