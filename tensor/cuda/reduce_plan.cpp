#include "tensor/cuda/reduce_plan.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <limits>

#include "tensor/check.h"
#include "tensor/cuda/cuda_check.h"

namespace thd::cuda {

namespace {

// Threads an SM keeps resident that the launch shapes aim to fill (half of Hopper's
// 2048: the kernels keep several loads in flight per thread, and a second wave of
// blocks costs more than the occupancy it would add).
constexpr int64_t kThreadsPerSm = 1024;

struct Dim {
  int64_t size;
  int64_t in;    // input stride, elements
  int64_t out;   // output stride, elements (kept dims)
  int64_t ridx;  // position stride among the reduced dims (reduced dims)
  bool reduced;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Size-1 dims dropped, the rest in memory order (outermost first) with neighbours of
// one kind merged where their strides chain.
std::vector<Dim> merged_dims(const Tensor& in, const std::vector<bool>& mask, bool ordered_index) {
  const int64_t nd = in.dim();
  std::vector<int64_t> out_stride(static_cast<size_t>(nd), 0);
  std::vector<int64_t> ridx_stride(static_cast<size_t>(nd), 0);
  for (int64_t d = nd - 1, o = 1, r = 1; d >= 0; --d) {
    if (mask[d]) {
      ridx_stride[d] = r;
      r *= in.shape()[d];
    } else {
      out_stride[d] = o;
      o *= in.shape()[d];
    }
  }
  std::vector<Dim> dims;
  for (int64_t d = 0; d < nd; ++d) {
    if (in.shape()[d] == 1) continue;
    dims.push_back({in.shape()[d], in.strides()[d], out_stride[d], ridx_stride[d], mask[d]});
  }
  std::stable_sort(dims.begin(), dims.end(),
                   [](const Dim& a, const Dim& b) { return std::abs(a.in) > std::abs(b.in); });
  std::vector<Dim> merged;
  for (const Dim& d : dims) {
    if (!merged.empty()) {
      Dim& m = merged.back();  // m is outside d in memory
      const bool chains = m.reduced == d.reduced && m.in == d.in * d.size &&
                          (d.reduced ? !ordered_index || m.ridx == d.ridx * d.size
                                     : m.out == d.out * d.size);
      if (chains) {
        m = {m.size * d.size, d.in, d.out, d.ridx, d.reduced};
        continue;
      }
    }
    merged.push_back(d);
  }
  return merged;
}

RowConfig row_config(const ReduceLayout& l, int64_t elem, int64_t sms) {
  RowConfig c;
  const int64_t vec = l.red_in == 1 ? 16 / elem : 1;
  const int64_t r = l.n_red;
  // About four 16-byte loads per thread at least; a block per output past a warp.
  const int64_t lanes = std::max<int64_t>(1, ceil_div(r, 4 * vec));
  if (lanes <= 32) {
    c.group = static_cast<int>(next_pow2(lanes));
    c.block = 256;
  } else {
    c.group = static_cast<int>(std::min<int64_t>(512, next_pow2(lanes)));
    c.block = c.group;
  }
  const int64_t want_items = sms * kThreadsPerSm / c.group;
  if (l.n_out < want_items && r > 0) {
    // Few long outputs: split each so every SM has work, but keep >= 16 loads per
    // thread in a split.
    const int64_t max_splits = std::max<int64_t>(1, r / (c.group * vec * 16));
    c.splits = std::min(ceil_div(want_items, l.n_out), max_splits);
  }
  c.chunk = r;
  if (c.splits > 1) {
    // Chunks of whole 16-byte vectors keep every chunk as aligned as its row.
    c.chunk = ceil_div(ceil_div(r, c.splits), vec) * vec;
    c.splits = ceil_div(r, c.chunk);
  }
  const int64_t groups_per_block = c.block / c.group;
  const int64_t blocks = ceil_div(l.n_out * c.splits, groups_per_block);
  // Past a few waves the kernel's grid-stride loop takes the rest.
  c.grid = static_cast<int>(std::clamp<int64_t>(blocks, 1, sms * 2048 / c.block * 4));
  return c;
}

}  // namespace

int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

ColumnConfig column_config(int64_t n_out, int64_t n_red, int64_t sms) {
  ColumnConfig c;
  const int64_t r = n_red;
  int64_t bx = std::min<int64_t>(32, next_pow2(n_out));
  const int64_t by = std::min<int64_t>(256 / bx, next_pow2(ceil_div(r, 8)));
  bx = std::min<int64_t>(next_pow2(n_out), 256 / by);
  c.block_x = static_cast<int>(bx);
  c.block_y = static_cast<int>(by);
  c.grid_x = ceil_div(n_out, bx);
  THD_CHECK(c.grid_x <= std::numeric_limits<int32_t>::max(), ValueError, "reduce",
            "{} outputs are more than one kernel launch covers", n_out);
  const int64_t want_blocks = std::max<int64_t>(1, sms * kThreadsPerSm / (bx * by));
  if (n_out > 0 && c.grid_x < want_blocks && r > 0) {
    const int64_t max_splits = std::max<int64_t>(1, r / (by * 16));
    c.splits = std::min({ceil_div(want_blocks, c.grid_x), max_splits, int64_t{65535}});
  }
  c.chunk = r;
  if (c.splits > 1) {
    c.chunk = ceil_div(r, c.splits);
    c.splits = ceil_div(r, c.chunk);
  }
  return c;
}

int multiprocessor_count(int device) {
  static std::array<std::atomic<int>, 64> cache{};
  const bool cached = device >= 0 && device < static_cast<int>(cache.size());
  if (cached) {
    const int n = cache[static_cast<size_t>(device)].load(std::memory_order_relaxed);
    if (n > 0) return n;
  }
  int n = 0;
  THD_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device), "reduce");
  n = std::max(n, 1);
  if (cached) cache[static_cast<size_t>(device)].store(n, std::memory_order_relaxed);
  return n;
}

ReducePlan plan_reduce(const Tensor& in, const std::vector<bool>& mask, bool ordered_index) {
  ReducePlan plan;
  plan.input = in;
  ReduceLayout& l = plan.layout;
  l.n_out = 1;
  l.n_red = 1;
  for (int64_t d = 0; d < in.dim(); ++d) (mask[d] ? l.n_red : l.n_out) *= in.shape()[d];
  const int64_t sms = multiprocessor_count(in.device().index());
  if (l.n_out == 0 || l.n_red == 0) {
    // Nothing to read: every output is the op's identity (or nothing is written).
    l.inner_size = std::max<int64_t>(1, l.n_out);
    l.inner_out = 1;
    plan.rows = false;
    plan.column = column_config(l.n_out, l.n_red, sms);
    return plan;
  }
  const std::vector<Dim> dims = merged_dims(in, mask, ordered_index);
  std::vector<Dim> kept, reduced;
  for (const Dim& d : dims) (d.reduced ? reduced : kept).push_back(d);
  if (reduced.size() <= 1 && kept.size() <= 2) {
    if (!reduced.empty()) l.red_in = reduced[0].in;
    if (!kept.empty()) {
      const Dim& inner = kept.back();
      l.inner_size = inner.size;
      l.inner_in = inner.in;
      l.inner_out = inner.out;
    }
    if (kept.size() == 2) {
      l.outer_in = kept[0].in;
      l.outer_out = kept[0].out;
    }
  } else {
    // Kept dims first, reduced dims last, both in logical order: one contiguous row
    // per output, r its row-major position.
    Dims perm;
    for (int64_t d = 0; d < in.dim(); ++d) {
      if (!mask[d]) perm.push_back(d);
    }
    for (int64_t d = 0; d < in.dim(); ++d) {
      if (mask[d]) perm.push_back(d);
    }
    plan.input = in.permute(perm).contiguous();
    kept.assign(1, Dim{l.n_out, l.n_red, 1, 0, false});
    l.inner_size = l.n_out;
    l.inner_in = l.n_red;
    l.inner_out = 1;
    l.outer_in = l.outer_out = 0;
    l.red_in = 1;
  }
  int64_t min_kept = std::numeric_limits<int64_t>::max();
  for (const Dim& d : kept) min_kept = std::min(min_kept, std::abs(d.in));
  // Rows of at most 32 bytes each ([N, 4].sum(1)) go to the column kernel too: a
  // thread per output reads its row with independent loads, where a row group would
  // spend a whole pass of the grid-stride loop on each.
  const bool short_rows = l.n_red * static_cast<int64_t>(in.element_size()) <= 32 &&
                          l.n_out >= 1024;
  plan.rows = kept.empty() ||
              (l.n_red > 1 && std::abs(l.red_in) <= min_kept && !short_rows);
  if (plan.rows) {
    plan.row = row_config(l, static_cast<int64_t>(in.element_size()), sms);
  } else {
    plan.column = column_config(l.n_out, l.n_red, sms);
  }
  return plan;
}

}  // namespace thd::cuda
