// Which algorithm each entry point of algorithms.h runs, by message size and group
// size. The thresholds below are the defaults, measured on the project's 2-core VM;
// THD_ALLREDUCE_RD_MAX_BYTES, THD_BROADCAST_TREE_MAX_BYTES and
// THD_REDUCE_RING_MIN_BYTES move them for another machine (every rank of a job
// must be given the same: ranks that choose different algorithms do not meet).
// THD_ALLREDUCE_ALGO=ring|rd and THD_BROADCAST_ALGO=tree|ring force a choice (for
// benchmarks). A malformed value is a ValueError naming the variable.
#pragma once

#include <cstddef>

namespace thd::detail {

// Up to this many bytes all_reduce runs recursive doubling: log2(n) rounds of
// whole buffers beat the ring's 2 (n - 1) message latencies while the buffer is
// small against the bytes a link moves in one message latency.
inline constexpr size_t kAllReduceRecursiveDoublingMaxBytes = 64 * 1024;
// Up to this many bytes broadcast runs the binomial tree; above it the chunked
// chain, whose time stops growing with log2(n).
inline constexpr size_t kBroadcastTreeMaxBytes = 256 * 1024;
// From this many bytes (and 3 or more ranks) reduce runs ring reduce-scatter +
// gather instead of the binomial tree, which makes the root take in log2(n)
// whole buffers.
inline constexpr size_t kReduceRingMinBytes = 1024 * 1024;

enum class AllReduceAlgorithm { RecursiveDoubling, Ring };
enum class BroadcastAlgorithm { BinomialTree, PipelinedRing };
enum class ReduceAlgorithm { BinomialTree, Ring };

// The choices, env overrides included.
AllReduceAlgorithm choose_all_reduce(size_t nbytes, size_t count, int group_size);
BroadcastAlgorithm choose_broadcast(size_t nbytes, int group_size);
ReduceAlgorithm choose_reduce(size_t nbytes, int group_size);

}  // namespace thd::detail
