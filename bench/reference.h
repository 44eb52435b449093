// Plain C++ loops that the tensor figures are compared with. They live in their own
// translation unit, built at the library's optimization level, so the compiler cannot
// fold them into the timing loop and they vectorize as well as thd's kernels can.
#pragma once

#include <cstdint>

namespace thd::bench::ref {

// c[i] = a[i] + b[i] on the calling thread.
void stream_add(const float* a, const float* b, float* c, int64_t n);
// The same split into `threads` contiguous chunks, one std::thread each.
void stream_add_threads(const float* a, const float* b, float* c, int64_t n, int threads);
// Sum with independent float accumulators (what a vectorized float reduction does),
// combined in double.
float sum(const float* a, int64_t n);
// The same split into `threads` contiguous chunks, one std::thread each.
float sum_threads(const float* a, int64_t n, int threads);

}  // namespace thd::bench::ref
