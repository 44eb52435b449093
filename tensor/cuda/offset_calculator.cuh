// Where each element of N operands of one elementwise kernel lives: on the host, the
// operands' shared shape with unit dims dropped and adjacent dims merged wherever
// every operand is contiguous across them (so most ops become 0 or 1 dims); on the
// device, linear element index -> byte offset of every operand.
//
// Operand 0 is the output; the others are read, broadcast to its shape (stride 0).
// Other kernel families may use this as it is (read-only for them).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <vector>

#include <thd/tensor.h>

namespace thd::cuda {

// Dims of a geometry a kernel takes (after merging). Larger geometries are split on
// the host (for_each_32bit_piece).
inline constexpr int kMaxDims = 12;

// Host side. dims are stored innermost first.
template <int N>
struct Geometry {
  std::array<char*, N> base{};                   // element 0; nullptr: a value operand
  std::vector<int64_t> sizes;                    // per dim, innermost first, all > 1
  std::vector<std::array<int64_t, N>> strides;   // bytes, per dim, per operand
  int64_t numel = 1;

  int ndim() const { return static_cast<int>(sizes.size()); }
};

// The geometry of `ops` (ops[0] the output; a nullptr operand is a value read by
// every element, stride 0). Dims of size 1 are dropped, the rest ordered by the
// output's strides (so writes are coalesced even into a transposed output) and merged
// where every operand allows.
template <int N>
Geometry<N> make_geometry(const std::array<const Tensor*, N>& ops) {
  const Tensor& out = *ops[0];
  const Shape& shape = out.shape();
  const size_t nd = shape.size();
  Geometry<N> g;
  g.numel = out.numel();
  // Per dim of out (outer .. inner), per operand: byte stride, 0 where broadcast.
  std::vector<std::array<int64_t, N>> st(nd);
  for (size_t d = 0; d < nd; ++d) st[d].fill(0);
  for (int k = 0; k < N; ++k) {
    const Tensor* t = ops[k];
    if (t == nullptr) continue;
    g.base[k] = static_cast<char*>(t->data_ptr());
    const size_t off = nd - t->shape().size();
    const auto es = static_cast<int64_t>(t->element_size());
    for (size_t i = 0; i < t->shape().size(); ++i) {
      st[off + i][k] = t->shape()[i] == 1 ? 0 : t->strides()[i] * es;
    }
  }
  std::vector<size_t> order;  // dims of size > 1, outermost first
  for (size_t d = 0; d < nd; ++d) {
    if (shape[d] != 1) order.push_back(d);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::llabs(st[a][0]) > std::llabs(st[b][0]);
  });
  // Merge from the inside out.
  for (size_t j = order.size(); j-- > 0;) {
    const size_t d = order[j];
    bool merge = !g.sizes.empty();
    for (int k = 0; k < N && merge; ++k) {
      merge = st[d][k] == g.strides.back()[k] * g.sizes.back();
    }
    if (merge) {
      g.sizes.back() *= shape[d];
    } else {
      g.sizes.push_back(shape[d]);
      g.strides.push_back(st[d]);
    }
  }
  return g;
}

// Whether every linear index and every operand's byte offset (either sign) fits in
// an int32, and the dims fit an OffsetCalculator.
template <int N>
bool fits_32bit(const Geometry<N>& g) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (g.numel > kMax || g.ndim() > kMaxDims) return false;
  for (int k = 0; k < N; ++k) {
    int64_t span = 0;
    for (int d = 0; d < g.ndim(); ++d) span += (g.sizes[d] - 1) * std::llabs(g.strides[d][k]);
    if (span > kMax) return false;
  }
  return true;
}

// Calls f(piece) for disjoint pieces of g that together cover it, each fitting 32-bit
// indexing (fits_32bit): g itself when it fits, else halves of its outermost dim, or
// one piece per index of that dim when there are more than kMaxDims dims.
template <int N, typename F>
void for_each_32bit_piece(const Geometry<N>& g, F&& f) {
  if (g.numel == 0) return;
  if (fits_32bit(g)) {
    f(g);
    return;
  }
  const int outer = g.ndim() - 1;
  const int64_t size = g.sizes[outer];
  // The pieces [begin, end) of the outer dim.
  auto piece = [&](int64_t begin, int64_t end) {
    Geometry<N> p = g;
    for (int k = 0; k < N; ++k) {
      if (p.base[k] != nullptr) p.base[k] += begin * g.strides[outer][k];
    }
    p.numel = g.numel / size * (end - begin);
    if (end - begin == 1) {
      p.sizes.pop_back();
      p.strides.pop_back();
    } else {
      p.sizes[outer] = end - begin;
    }
    for_each_32bit_piece(p, f);
  };
  if (g.ndim() > kMaxDims) {
    for (int64_t i = 0; i < size; ++i) piece(i, i + 1);
  } else {
    piece(0, size / 2);
    piece(size / 2, size);
  }
}

// n / d and n % d for a fixed d by multiplication and shift (Granlund & Montgomery),
// which costs a fraction of a hardware division. Valid for n < 2^31.
struct IntDivider {
  uint32_t divisor = 1;
  uint32_t magic = 1;
  uint32_t shift = 0;

  IntDivider() = default;
  explicit IntDivider(uint32_t d) : divisor(d) {
    shift = 0;
    while (shift < 32 && (uint64_t{1} << shift) < d) ++shift;
    const uint64_t one = 1;
    magic = static_cast<uint32_t>(((one << 32) * ((one << shift) - d)) / d + 1);
  }

  __device__ __forceinline__ uint32_t div(uint32_t n) const {
    const uint32_t t = __umulhi(n, magic);
    return (t + n) >> shift;
  }
};

// Device side: linear index (row-major over the output's merged dims) -> byte offset
// of each operand, in 32-bit arithmetic. Built from a piece that fits_32bit.
template <int N>
struct OffsetCalculator {
  int ndim;
  IntDivider sizes[kMaxDims];
  int32_t strides[kMaxDims][N];

  explicit OffsetCalculator(const Geometry<N>& g) : ndim(g.ndim()) {
    for (int d = 0; d < kMaxDims; ++d) {
      sizes[d] = d < ndim ? IntDivider(static_cast<uint32_t>(g.sizes[d])) : IntDivider();
      for (int k = 0; k < N; ++k) {
        strides[d][k] = d < ndim ? static_cast<int32_t>(g.strides[d][k]) : 0;
      }
    }
  }

  __device__ __forceinline__ void get(uint32_t linear, int32_t (&offsets)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) offsets[k] = 0;
#pragma unroll
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == ndim) break;
      const uint32_t next = sizes[d].div(linear);
      const auto index = static_cast<int32_t>(linear - next * sizes[d].divisor);
      linear = next;
#pragma unroll
      for (int k = 0; k < N; ++k) offsets[k] += index * strides[d][k];
    }
  }
};

}  // namespace thd::cuda
