// Intra-op parallelism for CPU kernels: a fork-join pool shared by all ops.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tensor/function_ref.h"

namespace thd::detail {

// Elements below which a kernel stays on the calling thread: splitting smaller work
// costs more in wake-ups than it saves.
inline constexpr int64_t kGrainSize = 32768;

// Threads the pool runs ops on (the caller included): THD_NUM_THREADS if set, else the
// number of cores. The variable is read when the pool is first used (num_threads(),
// set_num_threads() or a parallel_for large enough to split).
int num_threads();
void set_num_threads(int n);

// The most threads THD_NUM_THREADS may ask for.
inline constexpr int kMaxThreads = 4096;

// The pool's threads for `value`, THD_NUM_THREADS's text: that many, or one per core
// when it is unset, empty or 0. ValueError naming the variable for anything but a
// whole number from 0 to kMaxThreads.
int pool_threads(const std::optional<std::string>& value);

// Calls fn(chunk_begin, chunk_end) over disjoint chunks covering [begin, end), each
// at least `grain` long except possibly the last, in parallel when the range is
// large enough. Blocks until all chunks ran; rethrows the first exception a chunk
// threw. Nested calls (from inside a chunk) run serially. A range of at most `grain`
// elements is one call of fn on the calling thread, without touching the pool.
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  FunctionRef<void(int64_t, int64_t)> fn);

// True on a pool thread or inside a parallel_for chunk.
bool in_parallel_region();

}  // namespace thd::detail
