#include "tensor/cuda/sort_radix.h"

#include <cub/device/device_radix_sort.cuh>

#include <thd/tensor.h>

#include "tensor/cuda/cuda_check.h"

namespace thd::cuda::sort_detail {

template <typename K, typename V>
int radix_sort_pairs(K* const keys[2], V* const values[2], int64_t count, int end_bit,
                     int device, cudaStream_t stream) {
  const char* op = "sort";
  cub::DoubleBuffer<K> k(keys[0], keys[1]);
  cub::DoubleBuffer<V> v(values[0], values[1]);
  size_t scratch_bytes = 0;
  THD_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, scratch_bytes, k, v, count, 0, end_bit,
                                                 stream),
                 op);
  // Freed when this returns, while the sort may still run: the caching allocator only
  // hands the block out again to work on the same stream, which runs after the sort.
  Tensor scratch =
      Tensor::empty({static_cast<int64_t>(scratch_bytes)}, kUInt8, Device::cuda(device));
  THD_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(scratch.data_ptr(), scratch_bytes, k, v, count,
                                                 0, end_bit, stream),
                 op);
  return k.selector;
}

template int radix_sort_pairs<uint32_t, int32_t>(uint32_t* const[2], int32_t* const[2], int64_t,
                                                 int, int, cudaStream_t);
template int radix_sort_pairs<uint32_t, int64_t>(uint32_t* const[2], int64_t* const[2], int64_t,
                                                 int, int, cudaStream_t);
template int radix_sort_pairs<uint64_t, int32_t>(uint64_t* const[2], int32_t* const[2], int64_t,
                                                 int, int, cudaStream_t);
template int radix_sort_pairs<uint64_t, int64_t>(uint64_t* const[2], int64_t* const[2], int64_t,
                                                 int, int, cudaStream_t);

}  // namespace thd::cuda::sort_detail
