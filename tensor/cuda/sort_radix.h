// Stable radix sort of (key, value) pairs on one device: the one CUB instantiation
// sort and topk share, in a file of its own because it is the slowest to compile.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace thd::cuda::sort_detail {

// Sorts the pairs (keys[0][i], values[0][i]), i < count, by bits [0, end_bit) of the
// keys; pairs with equal keys keep their order. keys[1] and values[1] are buffers of
// the same size; either pair of buffers may be overwritten and the result is in
// keys[r], values[r] for the returned r. Asynchronous on `stream` of `device`, which
// must be current; scratch comes from the device's caching allocator.
// Instantiated for K = uint32_t, uint64_t and V = int32_t, int64_t.
template <typename K, typename V>
int radix_sort_pairs(K* const keys[2], V* const values[2], int64_t count, int end_bit,
                     int device, cudaStream_t stream);

}  // namespace thd::cuda::sort_detail
