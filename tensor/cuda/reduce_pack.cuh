// 16-byte vectors of elements: one ld.global.v4 / st.global.v4 instead of up to 16
// scalar accesses. Callers check the 16-byte alignment.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace thd::cuda::reduce_detail {

template <typename T>
struct alignas(16) Pack {
  static constexpr int kSize = static_cast<int>(16 / sizeof(T));
  T v[kSize];
};

template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  Pack<T> pk;
  memcpy(&pk, &raw, sizeof(pk));
  return pk;
}

template <typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& pk) {
  uint4 raw;
  memcpy(&raw, &pk, sizeof(raw));
  *reinterpret_cast<uint4*>(p) = raw;
}

}  // namespace thd::cuda::reduce_detail
