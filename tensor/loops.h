// The elementwise engine: walks N operands of one (broadcast) shape together, in
// parallel chunks, handing each innermost run to a typed loop.
//
// Operand 0 is the output. Geometry is computed once per op: size-1 dims are dropped,
// dims are ordered by the output's strides (so in-place ops on transposed tensors walk
// memory in order) and adjacent dims that are contiguous for every operand are merged,
// which turns most ops into one long 1-D run that the compiler vectorizes.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <vector>

#include <thd/tensor.h>

#include "tensor/dispatch.h"
#include "tensor/parallel.h"

namespace thd::detail {

template <int N>
struct Geometry {
  Shape shape;                                  // outer .. inner
  std::array<std::vector<int64_t>, N> strides;  // bytes, per operand, per dim
  std::array<char*, N> base{};
  int64_t numel = 1;
};

// Operands must broadcast to `shape` (the output's shape). Broadcast dims get stride 0.
template <int N>
Geometry<N> make_geometry(const std::array<const Tensor*, N>& ops, const Shape& shape) {
  Geometry<N> g;
  const size_t nd = shape.size();
  std::array<std::vector<int64_t>, N> st;
  for (int k = 0; k < N; ++k) {
    const Tensor& t = *ops[k];
    g.base[k] = static_cast<char*>(t.data_ptr());
    st[k].assign(nd, 0);
    const size_t off = nd - t.shape().size();
    const auto es = static_cast<int64_t>(t.element_size());
    for (size_t i = 0; i < t.shape().size(); ++i) {
      st[k][off + i] = t.shape()[i] == 1 ? 0 : t.strides()[i] * es;
    }
  }
  // Keep dims of size > 1, ordered by the output's stride magnitude, outermost first.
  std::vector<size_t> order;
  for (size_t i = 0; i < nd; ++i) {
    if (shape[i] != 1) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    auto sa = std::abs(st[0][a]), sb = std::abs(st[0][b]);
    return sa > sb;
  });
  // Merge from the inside out.
  std::vector<int64_t> sizes;
  std::array<std::vector<int64_t>, N> strides;
  for (size_t j = order.size(); j-- > 0;) {
    const size_t d = order[j];
    bool merge = !sizes.empty();
    for (int k = 0; k < N && merge; ++k) {
      merge = st[k][d] == strides[k].back() * sizes.back();
    }
    if (merge) {
      sizes.back() *= shape[d];
    } else {
      sizes.push_back(shape[d]);
      for (int k = 0; k < N; ++k) strides[k].push_back(st[k][d]);
    }
  }
  std::reverse(sizes.begin(), sizes.end());
  for (int k = 0; k < N; ++k) std::reverse(strides[k].begin(), strides[k].end());
  g.shape = std::move(sizes);
  g.strides = std::move(strides);
  g.numel = 1;
  for (int64_t s : shape) g.numel *= s;
  return g;
}

// Geometry over the lines along `dim` of operands viewed with `shape` (given size 1 at
// dim): each "element" it visits is the start of one line, which the caller walks
// with the operands' own strides along dim. Ops that treat a whole line at once
// (sort, scatter) use it so one thread owns each line.
template <int N>
Geometry<N> make_line_geometry(const std::array<const Tensor*, N>& ops, Shape shape, int64_t dim) {
  shape[dim] = 1;
  std::array<Tensor, N> views;
  std::array<const Tensor*, N> ptrs;
  for (int k = 0; k < N; ++k) {
    views[k] = Tensor(ops[k]->storage(), ops[k]->dtype(), shape, ops[k]->strides(),
                      ops[k]->storage_offset());
    ptrs[k] = &views[k];
  }
  return make_geometry<N>(ptrs, shape);
}

// Calls loop(char* ptrs[N], const int64_t inner_strides[N], int64_t n) over runs of the
// innermost dim covering every element once, in parallel chunks of >= grain elements.
template <int N, typename Loop>
void for_each_run(const Geometry<N>& g, Loop&& loop, int64_t grain = kGrainSize) {
  if (g.numel == 0) return;
  const int64_t nd = static_cast<int64_t>(g.shape.size());
  if (nd == 0) {
    std::array<char*, N> p = g.base;
    std::array<int64_t, N> zero{};
    loop(p.data(), zero.data(), int64_t{1});
    return;
  }
  std::array<int64_t, N> inner;
  for (int k = 0; k < N; ++k) inner[k] = g.strides[k][nd - 1];
  const int64_t inner_size = g.shape[nd - 1];
  parallel_for(0, g.numel, grain, [&](int64_t begin, int64_t end) {
    // Position of `begin` as a multi-index.
    std::vector<int64_t> idx(nd);
    int64_t rem = begin;
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[d] = rem % g.shape[d];
      rem /= g.shape[d];
    }
    std::array<char*, N> p;
    for (int k = 0; k < N; ++k) {
      p[k] = g.base[k];
      for (int64_t d = 0; d < nd; ++d) p[k] += idx[d] * g.strides[k][d];
    }
    int64_t i = begin;
    while (i < end) {
      const int64_t n = std::min(inner_size - idx[nd - 1], end - i);
      loop(p.data(), inner.data(), n);
      i += n;
      if (i >= end) break;
      // Advance to the start of the next run, carrying into outer dims.
      idx[nd - 1] += n;
      for (int k = 0; k < N; ++k) p[k] += n * inner[k];
      for (int64_t d = nd - 1; d > 0 && idx[d] == g.shape[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
        for (int k = 0; k < N; ++k) p[k] += g.strides[k][d - 1] - g.shape[d] * g.strides[k][d];
      }
    }
  });
}

// for_each_run for operands that need no geometry: operand k's element i lies at
// base[k] + i * step[k] (step 0: one value every element reads). Calls
// loop(char* ptrs[N], const int64_t steps[N], int64_t n) over chunks of [0, numel),
// on the calling thread alone when numel is at most `grain`.
template <size_t N, typename Loop>
void for_each_flat(const std::array<char*, N>& base, const std::array<int64_t, N>& step,
                   int64_t numel, Loop&& loop, int64_t grain = kGrainSize) {
  auto chunk = [&](int64_t begin, int64_t end) {
    std::array<char*, N> p;
    for (size_t k = 0; k < N; ++k) p[k] = base[k] + begin * step[k];
    loop(p.data(), step.data(), end - begin);
  };
  if (numel <= grain) {
    if (numel > 0) chunk(0, numel);
    return;
  }
  parallel_for(0, numel, grain, chunk);
}

// ---- typed inner loops ------------------------------------------------------------
// f receives compute_t<In> values and returns something convertible to Out.

template <typename Out, typename In, typename F>
void unary_run(char** p, const int64_t* s, int64_t n, F& f) {
  using CI = compute_t<In>;
  if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
    Out* o = reinterpret_cast<Out*>(p[0]);
    const In* a = reinterpret_cast<const In*>(p[1]);
    if (static_cast<void*>(o) == static_cast<const void*>(a)) {
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(static_cast<CI>(a[i])));
    } else {
      Out* __restrict ro = o;
      const In* __restrict ra = a;
      for (int64_t i = 0; i < n; ++i) ro[i] = static_cast<Out>(f(static_cast<CI>(ra[i])));
    }
    return;
  }
  char* po = p[0];
  const char* pa = p[1];
  for (int64_t i = 0; i < n; ++i, po += s[0], pa += s[1]) {
    *reinterpret_cast<Out*>(po) =
        static_cast<Out>(f(static_cast<CI>(*reinterpret_cast<const In*>(pa))));
  }
}

template <typename Out, typename In, typename F>
void binary_run(char** p, const int64_t* s, int64_t n, F& f) {
  using CI = compute_t<In>;
  constexpr int64_t so = sizeof(Out), si = sizeof(In);
  Out* o = reinterpret_cast<Out*>(p[0]);
  const In* a = reinterpret_cast<const In*>(p[1]);
  const In* b = reinterpret_cast<const In*>(p[2]);
  if (s[0] == so && s[1] == si && s[2] == si) {
    if (static_cast<void*>(o) == static_cast<const void*>(a) ||
        static_cast<void*>(o) == static_cast<const void*>(b)) {
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(CI(a[i]), CI(b[i])));
    } else {
      Out* __restrict ro = o;
      const In* __restrict ra = a;
      const In* __restrict rb = b;
      for (int64_t i = 0; i < n; ++i) ro[i] = static_cast<Out>(f(CI(ra[i]), CI(rb[i])));
    }
    return;
  }
  if (s[0] == so && s[1] == si && s[2] == 0) {  // tensor op scalar
    const CI bv = CI(*b);
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(CI(a[i]), bv));
    return;
  }
  if (s[0] == so && s[1] == 0 && s[2] == si) {  // scalar op tensor
    const CI av = CI(*a);
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(av, CI(b[i])));
    return;
  }
  char* po = p[0];
  const char* pa = p[1];
  const char* pb = p[2];
  for (int64_t i = 0; i < n; ++i, po += s[0], pa += s[1], pb += s[2]) {
    *reinterpret_cast<Out*>(po) = static_cast<Out>(
        f(CI(*reinterpret_cast<const In*>(pa)), CI(*reinterpret_cast<const In*>(pb))));
  }
}

// Runs out[i] = f(in[i]) with out of type Out and in of type In. Both tensors must
// already have their final shapes (in broadcasts to out).
template <typename Out, typename In, typename F>
void unary_kernel(const Tensor& out, const Tensor& in, F f) {
  auto g = make_geometry<2>({&out, &in}, out.shape());
  for_each_run<2>(g, [&](char** p, const int64_t* s, int64_t n) { unary_run<Out, In>(p, s, n, f); });
}

template <typename Out, typename In, typename F>
void binary_kernel(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  auto g = make_geometry<3>({&out, &a, &b}, out.shape());
  for_each_run<3>(g, [&](char** p, const int64_t* s, int64_t n) { binary_run<Out, In>(p, s, n, f); });
}

// General N-ary form for the rarer ops (where, clamp with tensor bounds, ...): f gets
// the operand pointers of one element.
template <int N, typename F>
void nary_kernel(const std::array<const Tensor*, N>& ops, F f) {
  auto g = make_geometry<N>(ops, ops[0]->shape());
  for_each_run<N>(g, [&](char** p, const int64_t* s, int64_t n) {
    std::array<char*, N> q;
    for (int k = 0; k < N; ++k) q[k] = p[k];
    for (int64_t i = 0; i < n; ++i) {
      f(q.data());
      for (int k = 0; k < N; ++k) q[k] += s[k];
    }
  });
}

}  // namespace thd::detail
