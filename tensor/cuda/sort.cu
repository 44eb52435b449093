// sort and topk on CUDA: one stable radix sort (CUB) over all lines at once.
//
// Each element becomes an unsigned key whose integer order is the CPU's order of the
// values: the sign bit flipped for signed integers; for floats the IEEE trick
// (negatives inverted, positives with the sign bit set), every NaN mapped to the
// largest key and -0 to +0's key, so they compare equal as on the CPU. Descending
// inverts the key, so the sort stays a stable ascending one and equal values keep
// their input order in both directions, as the CPU's std::stable_sort does.
//
// Lines are sorted together by putting the line number above the key bits; when the
// two do not fit in 64 bits (64-bit dtypes), positions are sorted by key first and
// then, stably, by line. The values are sorted element positions; the last kernel
// reads each output's value from self at that position, so -0 stays -0.
#include <bit>
#include <cstring>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/cuda_stream.h"
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/index_geometry.cuh"
#include "tensor/cuda/sort_kernels.h"
#include "tensor/cuda/sort_radix.h"

namespace thd::cuda {

namespace {

using namespace index_detail;
using sort_detail::radix_sort_pairs;

template <typename T>
constexpr int key_bits() {
  if constexpr (std::is_same_v<T, bool>) return 1;
  else return 8 * static_cast<int>(sizeof(T));
}

// Bits of +infinity for each float type.
template <typename T>
constexpr uint64_t inf_bits() {
  if constexpr (std::is_same_v<T, __half>) return 0x7c00u;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return 0x7f80u;
  else if constexpr (std::is_same_v<T, float>) return 0x7f800000u;
  else return 0x7ff0000000000000ull;
}

// The key of v: integer order of keys = the CPU's order of values (see above).
template <typename T>
__device__ __forceinline__ uint64_t order_key(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? 1 : 0;
  } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
    return v;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<U>(static_cast<U>(v) ^ static_cast<U>(U{1} << (8 * sizeof(T) - 1)));
  } else {
    using U = typename Bits<sizeof(T)>::type;
    U u;
    memcpy(&u, &v, sizeof(U));
    constexpr U sign = static_cast<U>(U{1} << (8 * sizeof(U) - 1));
    const U magnitude = static_cast<U>(u & static_cast<U>(~sign));
    if (magnitude > static_cast<U>(inf_bits<T>())) return static_cast<U>(~U{0});  // NaN
    if (magnitude == 0) return sign;  // -0 and +0
    return (u & sign) != 0 ? static_cast<U>(~u) : static_cast<U>(u | sign);
  }
}

// keys[i] for element i of the lines (self's shape with dim last; operand: self),
// inverted when descending, with its line number above bit `kb` when with_line.
template <typename T, typename K>
__global__ void make_keys_kernel(Geometry<1> g, const T* self, int64_t n, int kb, bool descending,
                                 bool with_line, K* keys) {
  const uint64_t mask = kb == 64 ? ~uint64_t{0} : (uint64_t{1} << kb) - 1;
  grid_stride(g.numel, [&](int64_t i) {
    int64_t off[1];
    g.offsets(i, off);
    uint64_t key = order_key(self[off[0]]);
    if (descending) key = ~key & mask;
    if (with_line) {
      const uint64_t line = g.narrow ? static_cast<uint32_t>(i) / static_cast<uint32_t>(n)
                                     : static_cast<uint64_t>(i / n);
      key |= line << kb;
    }
    keys[i] = static_cast<K>(key);
  });
}

template <typename V>
__global__ void iota_kernel(V* out, int64_t count) {
  grid_stride(count, [&](int64_t i) { out[i] = static_cast<V>(i); });
}

// keys[i] = the line of position positions[i].
template <typename K, typename V>
__global__ void line_keys_kernel(const V* positions, int64_t count, int64_t n, bool narrow,
                                 K* keys) {
  grid_stride(count, [&](int64_t i) {
    const int64_t p = positions[i];
    keys[i] = static_cast<K>(narrow ? static_cast<uint32_t>(p) / static_cast<uint32_t>(n)
                                    : static_cast<uint64_t>(p / n));
  });
}

// Element i of the outputs seen with dim last (k along it) is element j < k of line
// `line` of the sorted positions. Operands: values, indices, self (stride 0 along dim).
template <typename E, typename V>
__global__ void write_sorted_kernel(Geometry<3> g, E* values, int64_t* indices, const E* self,
                                    int64_t self_step, const V* positions, int64_t n, int64_t k) {
  grid_stride(g.numel, [&](int64_t i) {
    int64_t off[3];
    g.offsets(i, off);
    int64_t line;
    int64_t j;
    if (g.narrow) {
      const uint32_t q = static_cast<uint32_t>(i) / static_cast<uint32_t>(k);
      line = q;
      j = static_cast<uint32_t>(i) - q * static_cast<uint32_t>(k);
    } else {
      line = i / k;
      j = i - line * k;
    }
    const int64_t pos = static_cast<int64_t>(positions[line * n + j]) - line * n;
    values[off[0]] = self[off[2] + pos * self_step];
    indices[off[1]] = pos;
  });
}

// A scratch array of count Ts on device, kept alive by the tensor.
template <typename T>
Tensor scratch(int64_t count, int device) {
  return Tensor::empty({count * static_cast<int64_t>(sizeof(T))}, kUInt8, Device::cuda(device));
}

// self seen as lines: its dims with dim moved last.
struct Lines {
  Shape shape;
  Shape strides;
  int64_t n;
  int64_t count;
};

Lines lines_of(const Tensor& self, int64_t dim) {
  Lines l;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d == dim) continue;
    l.shape.push_back(self.size(d));
    l.strides.push_back(self.stride(d));
  }
  l.shape.push_back(self.size(dim));
  l.strides.push_back(self.stride(dim));
  l.n = self.size(dim);
  l.count = self.numel();
  return l;
}

template <typename T, typename V>
void sort_typed(const Tensor& self, const Lines& lines, bool descending, const Geometry<3>& out,
                int64_t k, const Tensor& values, const Tensor& indices, int device,
                cudaStream_t stream) {
  const char* op = "sort";
  constexpr int kb = key_bits<T>();
  const int64_t count = lines.count;
  const int64_t n = lines.n;
  const auto line_count = static_cast<uint64_t>(count / n);
  const int lb = line_count > 1 ? std::bit_width(line_count - 1) : 0;  // line number bits
  const unsigned grid = grid_for(count, device);

  Tensor position_buffer = scratch<V>(2 * count, device);
  V* const positions[2] = {static_cast<V*>(position_buffer.data_ptr()),
                           static_cast<V*>(position_buffer.data_ptr()) + count};
  iota_kernel<V><<<grid, kBlock, 0, stream>>>(positions[0], count);
  THD_CUDA_CHECK_LAUNCH(op);

  const auto gk = make_geometry<1>(lines.shape, {lines.strides}, op);
  // Sorts positions[0] by key, the line number above it when with_line; returns
  // which buffer holds the result.
  auto sort_by_key = [&](auto key_tag, bool with_line, int end_bit) {
    using K = decltype(key_tag);
    Tensor key_buffer = scratch<K>(2 * count, device);
    K* const keys[2] = {static_cast<K*>(key_buffer.data_ptr()),
                        static_cast<K*>(key_buffer.data_ptr()) + count};
    make_keys_kernel<T, K><<<grid, kBlock, 0, stream>>>(
        gk, static_cast<const T*>(self.data_ptr()), n, kb, descending, with_line, keys[0]);
    THD_CUDA_CHECK_LAUNCH(op);
    return radix_sort_pairs<K, V>(keys, positions, count, end_bit, device, stream);
  };

  const V* sorted = nullptr;
  if (kb + lb <= 32) {
    if constexpr (kb <= 32) sorted = positions[sort_by_key(uint32_t{}, lb > 0, kb + lb)];
  } else if (kb + lb <= 64) {  // lb may be 0 here (one line of a 64-bit dtype)
    sorted = positions[sort_by_key(uint64_t{}, lb > 0, kb + lb)];
  } else {
    // By key over all lines, then stably by line.
    const int r = sort_by_key(uint64_t{}, false, kb);
    V* const by_key[2] = {positions[r], positions[1 - r]};
    auto sort_by_line = [&](auto key_tag) {
      using K = decltype(key_tag);
      Tensor key_buffer = scratch<K>(2 * count, device);
      K* const keys[2] = {static_cast<K*>(key_buffer.data_ptr()),
                          static_cast<K*>(key_buffer.data_ptr()) + count};
      line_keys_kernel<K, V><<<grid, kBlock, 0, stream>>>(by_key[0], count, n, gk.narrow,
                                                          keys[0]);
      THD_CUDA_CHECK_LAUNCH(op);
      return by_key[radix_sort_pairs<K, V>(keys, by_key, count, lb, device, stream)];
    };
    sorted = lb <= 32 ? sort_by_line(uint32_t{}) : sort_by_line(uint64_t{});
  }

  using E = typename Bits<sizeof(T)>::type;
  write_sorted_kernel<E, V><<<grid_for(out.numel, device), kBlock, 0, stream>>>(
      out, static_cast<E*>(values.data_ptr()), static_cast<int64_t*>(indices.data_ptr()),
      static_cast<const E*>(self.data_ptr()), lines.strides.back(), sorted, n, k);
  THD_CUDA_CHECK_LAUNCH(op);
}

}  // namespace

void sort_on_device(const Tensor& self, int64_t dim, bool descending, const Tensor& values,
                    const Tensor& indices) {
  const char* op = "sort";
  if (values.numel() == 0) return;
  const int device = self.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  const Lines lines = lines_of(self, dim);
  // The outputs seen the same way, k along the last dim; self's row start with it.
  Shape out_shape;
  std::array<Shape, 3> out_strides;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d == dim) continue;
    out_shape.push_back(values.size(d));
    out_strides[0].push_back(values.stride(d));
    out_strides[1].push_back(indices.stride(d));
    out_strides[2].push_back(self.stride(d));
  }
  out_shape.push_back(values.size(dim));
  out_strides[0].push_back(values.stride(dim));
  out_strides[1].push_back(indices.stride(dim));
  out_strides[2].push_back(0);
  const int64_t k = values.size(dim);
  const auto out = make_geometry<3>(out_shape, out_strides, op);
  dispatch<thd::detail::kAllSet>(self.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (lines.count <= INT32_MAX) {
      sort_typed<T, int32_t>(self, lines, descending, out, k, values, indices, device, stream);
    } else {
      sort_typed<T, int64_t>(self, lines, descending, out, k, values, indices, device, stream);
    }
  });
}

}  // namespace thd::cuda
