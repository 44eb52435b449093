#include "worker/sizes.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace thd::worker {

uint64_t saturating_mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}

uint64_t saturating_add(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

uint64_t numel_of(std::span<const int64_t> shape) {
  uint64_t n = 1;
  for (int64_t s : shape) n = saturating_mul(n, static_cast<uint64_t>(std::max<int64_t>(s, 0)));
  return n;
}

uint64_t broadcast_numel(std::initializer_list<std::span<const int64_t>> shapes) {
  size_t dims = 0;
  for (auto s : shapes) dims = std::max(dims, s.size());
  uint64_t n = 1;
  for (size_t i = 0; i < dims; ++i) {  // i-th dim from the last
    int64_t size = 0;
    bool any = false;
    for (auto s : shapes) {
      if (i >= s.size()) continue;
      size = any ? std::max(size, s[s.size() - 1 - i]) : s[s.size() - 1 - i];
      any = true;
    }
    n = saturating_mul(n, static_cast<uint64_t>(std::max<int64_t>(size, 0)));
  }
  return n;
}

uint64_t matmul_numel(const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) return 1;
  const auto sz = [](int64_t v) { return static_cast<uint64_t>(std::max<int64_t>(v, 0)); };
  const uint64_t n = a.size() >= 2 ? sz(a[a.size() - 2]) : 1;
  const uint64_t k = sz(a.back());
  const uint64_t m = b.size() >= 2 ? sz(b.back()) : 1;
  const std::span<const int64_t> batch_a(a.data(), a.size() >= 2 ? a.size() - 2 : 0);
  const std::span<const int64_t> batch_b(b.data(), b.size() >= 2 ? b.size() - 2 : 0);
  const uint64_t batch = broadcast_numel({batch_a, batch_b});
  // The output, and each operand expanded to the common batch.
  uint64_t total = saturating_mul(batch, saturating_mul(n, m));
  total = saturating_add(total, saturating_mul(batch, saturating_mul(n, k)));
  return saturating_add(total, saturating_mul(batch, saturating_mul(k, m)));
}

uint64_t index_select_numel(const Shape& a, int64_t dim, uint64_t index_numel) {
  const auto rank = static_cast<int64_t>(a.size());
  const int64_t d = dim < 0 ? dim + std::max<int64_t>(rank, 1) : dim;
  if (d < 0 || d >= std::max<int64_t>(rank, 1)) return 0;
  uint64_t n = index_numel;
  for (int64_t i = 0; i < rank; ++i) {
    if (i != d) n = saturating_mul(n, static_cast<uint64_t>(std::max<int64_t>(a[static_cast<size_t>(i)], 0)));
  }
  return n;
}

uint64_t reduced_numel(const Shape& shape, std::span<const int64_t> dims, bool all_dims) {
  if (all_dims || dims.empty()) return 1;
  const auto rank = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t dim : dims) {
    // A 0-dim tensor takes dim 0 or -1 and reduces nothing.
    const int64_t d = dim < 0 ? dim + std::max<int64_t>(rank, 1) : dim;
    if (d < 0 || d >= std::max<int64_t>(rank, 1)) return numel_of(shape);
    if (d < rank) reduced[static_cast<size_t>(d)] = true;
  }
  uint64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (!reduced[i]) n = saturating_mul(n, static_cast<uint64_t>(std::max<int64_t>(shape[i], 0)));
  }
  return n;
}

}  // namespace thd::worker
