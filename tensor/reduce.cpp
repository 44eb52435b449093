// Reductions: sum, mean, prod, max/min, argmax/argmin, norm, var/std, any/all.
// Each is a small Op (how to fold one element, a run, a block of rows; how to finish)
// driven by the engine in reduce_util.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include <thd/config.h>

#include "tensor/check.h"
#include "tensor/into_elementwise.h"
#include "tensor/into_reduce.h"
#include "tensor/cuda/reduce.h"
#include "tensor/dispatch.h"
#include "tensor/op_util.h"
#include "tensor/reduce_util.h"
#include "tensor/shape_util.h"

namespace thd {

using namespace detail;

namespace {

// ---- ops --------------------------------------------------------------------------

// Generic run and rows_block from Derived::fold(acc, value, ridx, out); ops override
// them where a vectorized form pays.
template <typename Derived, typename T, typename Acc, typename Out>
struct OpBase {
  using in_t = T;
  using acc_t = Acc;
  using out_t = Out;
  using C = compute_t<T>;

  static C load(const char* p) { return static_cast<C>(*reinterpret_cast<const T*>(p)); }

  Acc run(Acc a, const char* p, int64_t s, int64_t n, const RunPos& pos) const {
    const auto& d = static_cast<const Derived&>(*this);
    for (int64_t k = 0; k < n; ++k) {
      a = d.fold(a, load(p + k * s), pos.ridx + k * pos.ridx_stride, pos.out);
    }
    return a;
  }

  void rows_block(Acc* acc, const char* p, int64_t s, int64_t n, int64_t rs, int64_t rows,
                  const RunPos& pos) const {
    const auto& d = static_cast<const Derived&>(*this);
    constexpr int64_t kNarrow = 8;
    if (n <= kNarrow) {
      // Narrow rows ([N, 4].sum(0)): accumulators in registers, not reloaded per row.
      Acc loc[kNarrow];
      std::copy(acc, acc + n, loc);
      for (int64_t r = 0; r < rows; ++r, p += rs) {
        const int64_t ridx = pos.ridx + r * pos.ridx_stride;
        for (int64_t j = 0; j < n; ++j) {
          loc[j] = d.fold(loc[j], load(p + j * s), ridx, pos.out + j * pos.out_stride);
        }
      }
      std::copy(loc, loc + n, acc);
      return;
    }
    for (int64_t r = 0; r < rows; ++r, p += rs) {
      const int64_t ridx = pos.ridx + r * pos.ridx_stride;
      if (s == static_cast<int64_t>(sizeof(T))) {
        const T* q = reinterpret_cast<const T*>(p);
        for (int64_t j = 0; j < n; ++j) {
          acc[j] = d.fold(acc[j], static_cast<C>(q[j]), ridx, pos.out + j * pos.out_stride);
        }
      } else {
        for (int64_t j = 0; j < n; ++j) {
          acc[j] = d.fold(acc[j], load(p + j * s), ridx, pos.out + j * pos.out_stride);
        }
      }
    }
  }
};

// What sum-like ops add up. `wide` maps work in double even inside a block, where
// squares and powers of float32 would overflow or lose too much.
struct MapId {
  static constexpr bool wide = false;
  template <typename L>
  L operator()(L x) const { return x; }
};
struct MapAbs {
  static constexpr bool wide = true;
  double operator()(double x) const { return std::abs(x); }
};
struct MapSquare {
  static constexpr bool wide = true;
  double operator()(double x) const { return x * x; }
};
struct MapNonZero {
  static constexpr bool wide = true;
  double operator()(double x) const { return x != 0 ? 1.0 : 0.0; }
};
struct MapPowAbs {
  static constexpr bool wide = true;
  double p;
  double operator()(double x) const { return std::pow(std::abs(x), p); }
};

// How a sum becomes the result.
template <typename Out>
struct ProjCast {
  template <typename A>
  Out operator()(A a) const { return convert<Out>(a); }
};
template <typename Out>
struct ProjDiv {  // mean
  double n;
  Out operator()(double a) const { return convert<Out>(a / n); }
};
template <typename Out>
struct ProjSqrt {  // 2-norm
  Out operator()(double a) const { return convert<Out>(std::sqrt(a)); }
};
template <typename Out>
struct ProjRoot {  // p-norm
  double inv_p;
  Out operator()(double a) const { return convert<Out>(std::pow(a, inv_p)); }
};

// Sum of map(x) over n contiguous floating elements. A naive running float sum over
// millions of elements loses most of its digits, and the vectorizer may not reorder
// float additions: so independent lane accumulators (vectorized) cover short blocks,
// and the blocks are added in double.
template <typename L, typename T, typename Map>
double lane_sum(const T* p, int64_t n, const Map& map) {
  constexpr int kLanes = static_cast<int>(64 / sizeof(L));
  constexpr int64_t kBlock = 1024;
  double total = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    const T* q = p + b;
    L acc[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= m; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) {
        acc[j] += map(static_cast<L>(static_cast<compute_t<T>>(q[i + j])));
      }
    }
    for (; i < m; ++i) acc[0] += map(static_cast<L>(static_cast<compute_t<T>>(q[i])));
    for (int w = kLanes / 2; w > 0; w /= 2) {
      for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
    }
    total += static_cast<double>(acc[0]);
  }
  return total;
}

// Integer sums wrap around on overflow like torch's; unsigned arithmetic makes that
// defined behaviour.
inline int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

template <typename T>
int64_t int_sum(const T* p, int64_t n) {
  constexpr int kLanes = 8;
  uint64_t acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      acc[j] += static_cast<uint64_t>(static_cast<int64_t>(p[i + j]));
    }
  }
  for (; i < n; ++i) acc[0] += static_cast<uint64_t>(static_cast<int64_t>(p[i]));
  uint64_t s = 0;
  for (uint64_t a : acc) s += a;
  return static_cast<int64_t>(s);
}

// Floating inputs sum in double across blocks; integers and bool in int64.
template <typename T>
using sum_acc_t = std::conditional_t<is_float_v<T>, double, int64_t>;
// sum and prod give int64 for integer and bool inputs.
template <typename T>
using sum_out_t = std::conditional_t<is_float_v<T>, T, int64_t>;

template <typename T, typename Out, typename Map, typename Proj>
struct SumOp : OpBase<SumOp<T, Out, Map, Proj>, T, sum_acc_t<T>, Out> {
  using Base = OpBase<SumOp, T, sum_acc_t<T>, Out>;
  using Acc = sum_acc_t<T>;
  using C = compute_t<T>;
  Map map;
  Proj proj;

  SumOp(Map m, Proj p) : map(m), proj(p) {}
  Acc identity() const { return 0; }
  Acc fold(Acc a, C x, int64_t, int64_t) const {
    if constexpr (is_float_v<T>) {
      return a + map(static_cast<double>(x));
    } else {
      return wrap_add(a, static_cast<int64_t>(x));
    }
  }
  Acc run(Acc a, const char* p, int64_t s, int64_t n, const RunPos& pos) const {
    // Short runs fold one by one: the blocked kernel's setup would cost more.
    if (s != static_cast<int64_t>(sizeof(T)) || n < 64) return Base::run(a, p, s, n, pos);
    const T* q = reinterpret_cast<const T*>(p);
    if constexpr (is_float_v<T>) {
      using L = std::conditional_t<Map::wide, double, C>;
      return a + lane_sum<L>(q, n, map);
    } else {
      return wrap_add(a, int_sum(q, n));
    }
  }
  void rows_block(Acc* acc, const char* p, int64_t s, int64_t n, int64_t rs, int64_t rows,
                  const RunPos& pos) const {
    if constexpr (std::is_same_v<C, float> && !Map::wide) {
      // As in lane_sum: float partial sums over blocks of rows (twice the lanes of
      // double per instruction), added into the double accumulators per block.
      constexpr int64_t kMaxWidth = 4096, kRowBlock = 32;
      if (s == static_cast<int64_t>(sizeof(T)) && n > 8 && n <= kMaxWidth) {
        float part[kMaxWidth];
        for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
          std::fill(part, part + n, 0.0f);
          for (int64_t r = r0; r < std::min(rows, r0 + kRowBlock); ++r) {
            const T* q = reinterpret_cast<const T*>(p + r * rs);
            for (int64_t j = 0; j < n; ++j) part[j] += map(static_cast<float>(q[j]));
          }
          for (int64_t j = 0; j < n; ++j) acc[j] += static_cast<double>(part[j]);
        }
        return;
      }
    }
    Base::rows_block(acc, p, s, n, rs, rows, pos);
  }
  Acc combine(Acc a, Acc b) const {
    if constexpr (is_float_v<T>) {
      return a + b;
    } else {
      return wrap_add(a, b);
    }
  }
  Out project(Acc a, int64_t) const { return proj(a); }
};

template <typename T, typename Out, typename Map, typename Proj>
SumOp<T, Out, Map, Proj> sum_op(Map m, Proj p) {
  return SumOp<T, Out, Map, Proj>(m, p);
}

template <typename T>
struct ProdOp : OpBase<ProdOp<T>, T, sum_acc_t<T>, sum_out_t<T>> {
  using Acc = sum_acc_t<T>;
  using C = compute_t<T>;
  Acc identity() const { return 1; }
  Acc fold(Acc a, C x, int64_t, int64_t) const { return combine(a, static_cast<Acc>(x)); }
  Acc combine(Acc a, Acc b) const {
    if constexpr (is_float_v<T>) {
      return a * b;
    } else {  // wraps like torch
      return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    }
  }
  sum_out_t<T> project(Acc a, int64_t) const { return convert<sum_out_t<T>>(a); }
};

// max / min (and the inf norms, with Abs). NaN wins: once seen it stays.
template <typename T, bool IsMax, bool Abs = false>
struct MinMaxOp : OpBase<MinMaxOp<T, IsMax, Abs>, T, compute_t<T>, T> {
  using Base = OpBase<MinMaxOp, T, compute_t<T>, T>;
  using C = compute_t<T>;

  static C value(C x) {
    if constexpr (Abs) {
      return std::abs(x);
    } else {
      return x;
    }
  }
  static C pick(C a, C x) {
    if constexpr (is_float_v<T>) {
      return ((IsMax ? x > a : x < a) || x != x) ? x : a;
    } else {
      return (IsMax ? x > a : x < a) ? x : a;
    }
  }
  C identity() const {
    if constexpr (std::is_same_v<C, bool>) {
      return !IsMax;
    } else if constexpr (is_float_v<T>) {
      return IsMax ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
    } else {
      return IsMax ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
    }
  }
  C fold(C a, C x, int64_t, int64_t) const { return pick(a, value(x)); }
  C run(C a, const char* p, int64_t s, int64_t n, const RunPos& pos) const {
    if (s != static_cast<int64_t>(sizeof(T)) || n < 64) return Base::run(a, p, s, n, pos);
    const T* q = reinterpret_cast<const T*>(p);
    // Few enough lanes that accumulators and checks all stay in registers.
    constexpr int kLanes = 8, kChecks = 4;
    constexpr int64_t kBlock = 1024;
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t m = std::min(kBlock, n - b);
      // A plain compare-select per lane compiles to max/min instructions but drops
      // NaN; NaN (and inf - inf) shows up in the x - x lanes instead, and only such
      // a block is scanned again the careful way.
      C acc[kLanes], chk[kChecks];
      std::fill(acc, acc + kLanes, identity());
      std::fill(chk, chk + kChecks, C(0));
      int64_t i = 0;
      for (; i + kLanes <= m; i += kLanes) {
        for (int j = 0; j < kLanes; ++j) {
          const C x = value(static_cast<C>(q[b + i + j]));
          acc[j] = (IsMax ? acc[j] > x : acc[j] < x) ? acc[j] : x;
          if constexpr (is_float_v<T>) chk[j % kChecks] += x - x;
        }
      }
      for (; i < m; ++i) a = pick(a, value(static_cast<C>(q[b + i])));
      bool clean = true;
      for (int j = 0; j < kLanes; ++j) a = pick(a, acc[j]);
      if constexpr (is_float_v<T>) {
        for (int j = 0; j < kChecks; ++j) clean = clean && chk[j] == chk[j];
      }
      if (!clean) a = Base::run(a, p + b * static_cast<int64_t>(sizeof(T)), s, m, pos);
    }
    return a;
  }
  C combine(C a, C b) const { return pick(a, b); }
  T project(C a, int64_t) const { return static_cast<T>(a); }
};

template <typename C>
struct ArgAcc {
  C value;
  int64_t index;  // -1: nothing seen yet
};

// argmax / argmin: the first extreme; NaN counts as the extreme, the first NaN wins.
template <typename T, bool IsMax>
struct ArgOp : OpBase<ArgOp<T, IsMax>, T, ArgAcc<compute_t<T>>, int64_t> {
  using C = compute_t<T>;
  using Acc = ArgAcc<C>;

  // Does (x, xi) replace (y, yi)?
  static bool beats(C x, int64_t xi, C y, int64_t yi) {
    if constexpr (is_float_v<T>) {
      if (y != y) return x != x && xi < yi;
      if (x != x) return true;
    }
    if (IsMax ? x > y : x < y) return true;
    return x == y && xi < yi;
  }
  Acc identity() const { return {C(), -1}; }
  Acc fold(Acc a, C x, int64_t ridx, int64_t) const {
    return (a.index < 0 || beats(x, ridx, a.value, a.index)) ? Acc{x, ridx} : a;
  }
  Acc combine(Acc a, Acc b) const {
    if (b.index < 0) return a;
    return (a.index < 0 || beats(b.value, b.index, a.value, a.index)) ? b : a;
  }
  int64_t project(Acc a, int64_t) const { return a.index; }
};

template <typename T, bool IsAny>
struct AnyAllOp : OpBase<AnyAllOp<T, IsAny>, T, bool, bool> {
  using Base = OpBase<AnyAllOp, T, bool, bool>;
  using C = compute_t<T>;
  bool identity() const { return !IsAny; }
  bool fold(bool a, C x, int64_t, int64_t) const {
    return IsAny ? (a || x != C(0)) : (a && x != C(0));
  }
  bool run(bool a, const char* p, int64_t s, int64_t n, const RunPos& pos) const {
    if (a == IsAny) return a;  // already decided
    if (s != static_cast<int64_t>(sizeof(T))) return Base::run(a, p, s, n, pos);
    const T* q = reinterpret_cast<const T*>(p);
    // Branch-free blocks (vectorized), with an early exit between them.
    constexpr int64_t kBlock = 4096;
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t m = std::min(kBlock, n - b);
      unsigned found = 0;
      for (int64_t i = 0; i < m; ++i) {
        found |= IsAny ? (static_cast<C>(q[b + i]) != C(0)) : (static_cast<C>(q[b + i]) == C(0));
      }
      if (found) return IsAny;
    }
    return !IsAny;
  }
  bool combine(bool a, bool b) const { return IsAny ? (a || b) : (a && b); }
  bool project(bool a, int64_t) const { return a; }
};

// Second pass of var/std: squared deviations from the per-output means of the first
// pass, plus the plain deviations, whose sum corrects the rounding of the mean
// (the corrected two-pass algorithm).
struct VarAcc {
  double sq;
  double dev;
};

template <typename T>
struct VarOp : OpBase<VarOp<T>, T, VarAcc, T> {
  using Base = OpBase<VarOp, T, VarAcc, T>;
  using C = compute_t<T>;
  const double* mean;
  double n;
  double correction;
  bool take_sqrt;

  VarOp(const double* m, double count, double corr, bool sq)
      : mean(m), n(count), correction(corr), take_sqrt(sq) {}
  VarAcc identity() const { return {0, 0}; }
  VarAcc fold(VarAcc a, C x, int64_t, int64_t out) const {
    const double d = static_cast<double>(x) - mean[out];
    return {a.sq + d * d, a.dev + d};
  }
  VarAcc run(VarAcc a, const char* p, int64_t s, int64_t n_el, const RunPos& pos) const {
    if (s != static_cast<int64_t>(sizeof(T))) return Base::run(a, p, s, n_el, pos);
    const T* q = reinterpret_cast<const T*>(p);
    const double m = mean[pos.out];
    constexpr int kLanes = 4;
    double sq[kLanes] = {}, dev[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n_el; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) {
        const double d = static_cast<double>(static_cast<C>(q[i + j])) - m;
        sq[j] += d * d;
        dev[j] += d;
      }
    }
    for (; i < n_el; ++i) {
      const double d = static_cast<double>(static_cast<C>(q[i])) - m;
      a.sq += d * d;
      a.dev += d;
    }
    return {a.sq + ((sq[0] + sq[1]) + (sq[2] + sq[3])),
            a.dev + ((dev[0] + dev[1]) + (dev[2] + dev[3]))};
  }
  VarAcc combine(VarAcc a, VarAcc b) const { return {a.sq + b.sq, a.dev + b.dev}; }
  T project(VarAcc a, int64_t) const {
    double m2 = a.sq - a.dev * a.dev / n;
    if (m2 < 0) m2 = 0;
    // torch divides by max(0, N - correction): no degrees of freedom gives inf, or
    // nan when the deviations are 0 too.
    const double divisor = n > correction ? n - correction : 0.0;
    const double v = m2 / divisor;
    return convert<T>(take_sqrt ? std::sqrt(v) : v);
  }
};

// ---- driver -----------------------------------------------------------------------

struct ReduceSpec {
  std::vector<bool> mask;  // per input dim
  Shape out_shape;
  bool all = false;        // no dims named: every dim
  int64_t n_red = 1;       // elements per output
};

// dims == nullptr or an empty list: every dim.
ReduceSpec reduce_spec(const Tensor& t, const Dims* dims, bool keepdim, const char* op) {
  check_data(t, op);
  ReduceSpec s;
  const int64_t nd = t.dim();
  s.all = dims == nullptr || dims->empty();
  s.mask.assign(static_cast<size_t>(nd), s.all);
  if (!s.all) {
    for (int64_t d : wrap_dims(*dims, nd, op)) {
      if (d < nd) s.mask[d] = true;  // a 0-dim tensor takes dim 0 and reduces nothing
    }
  }
  for (int64_t d = 0; d < nd; ++d) {
    if (s.mask[d]) {
      s.n_red *= t.shape()[d];
      if (keepdim) s.out_shape.push_back(1);
    } else {
      s.out_shape.push_back(t.shape()[d]);
    }
  }
  return s;
}

// For ops without an identity (max, min, argmax, the inf norms).
void check_nonempty(const Tensor& t, const ReduceSpec& s, const char* op, const char* what) {
  if (s.n_red != 0) return;
  if (s.all) {
    THD_THROW(ValueError, op,
              "cannot perform reduction function {} on a tensor with no elements (shape {}) "
              "because the operation does not have an identity; specify a non-empty dim",
              what, shape_str(t.shape()));
  }
  for (int64_t d = 0; d < t.dim(); ++d) {
    THD_CHECK(!(s.mask[d] && t.shape()[d] == 0), IndexError, op,
              "Expected reduction dim {} to have non-zero size (input shape {}): {} has no "
              "identity",
              d, shape_str(t.shape()), what);
  }
}

// Into a new tensor, or into *into (tensor/into_reduce.h) when that can be the
// result: an undefined tensor, with nothing written, when it cannot.
template <typename Op>
Tensor run_reduce(const Tensor& in, const ReduceSpec& s, const Tensor* into, const Op& op) {
  using Out = typename Op::out_t;
  if (into != nullptr && !writable_result(*into, s.out_shape, dtype_of_v<Out>, Device::cpu(), {&in})) {
    return Tensor();
  }
  Tensor out = into != nullptr ? *into : Tensor::empty(s.out_shape, dtype_of_v<Out>);
  reduce_kernel(make_reduce_geometry(in, s.mask), op, out.data<Out>());
  return out;
}

// A CUDA tensor reduces on its device (tensor/cuda/), after the same checks as on
// the CPU. In a build without CUDA no such tensor can exist; check_cpu_kernel would
// say so.
Tensor reduce_on_device(const Tensor& t, const ReduceSpec& s, cuda::ReduceKind kind,
                        const char* op, double p = 2.0, int64_t correction = 1) {
#if THD_WITH_CUDA
  (void)op;
  return cuda::reduce(t, cuda::ReduceRequest{kind, s.mask, s.out_shape, p, correction});
#else
  (void)s, (void)kind, (void)p, (void)correction;
  check_cpu_kernel(op, t);
  THD_THROW(NotImplementedError, op, "{} has no kernel for {} tensors", op, t.device().str());
#endif
}

void check_floating(const Tensor& t, const char* op, const char* what) {
  THD_CHECK(is_floating_point(t.dtype()), TypeError, op, "{}. Got: {}", what, t.dtype());
}

constexpr const char* kMeanDtypeMsg =
    "could not infer output dtype. Input dtype must be either a floating point or complex "
    "dtype";

Tensor sum_impl(const Tensor& t, const Dims* dims, bool keepdim, const Tensor* into = nullptr) {
  ReduceSpec s = reduce_spec(t, dims, keepdim, "sum");
  if (!t.device().is_cpu()) return into != nullptr ? Tensor() : reduce_on_device(t, s, cuda::ReduceKind::Sum, "sum");
  return dispatch_all(t.dtype(), "sum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Out = sum_out_t<T>;
    return run_reduce(t, s, into, sum_op<T, Out>(MapId{}, ProjCast<Out>{}));
  });
}

Tensor mean_impl(const Tensor& t, const Dims* dims, bool keepdim, const Tensor* into = nullptr) {
  ReduceSpec s = reduce_spec(t, dims, keepdim, "mean");
  check_floating(t, "mean", kMeanDtypeMsg);
  if (!t.device().is_cpu()) return into != nullptr ? Tensor() : reduce_on_device(t, s, cuda::ReduceKind::Mean, "mean");
  return dispatch<kFloatingSet>(t.dtype(), "mean", [&](auto tag) {
    using T = typename decltype(tag)::type;
    return run_reduce(t, s, into, sum_op<T, T>(MapId{}, ProjDiv<T>{static_cast<double>(s.n_red)}));
  });
}

Tensor prod_impl(const Tensor& t, const Dims* dims, bool keepdim, const Tensor* into = nullptr) {
  ReduceSpec s = reduce_spec(t, dims, keepdim, "prod");
  if (!t.device().is_cpu()) return into != nullptr ? Tensor() : reduce_on_device(t, s, cuda::ReduceKind::Prod, "prod");
  return dispatch_all(t.dtype(), "prod", [&](auto tag) {
    using T = typename decltype(tag)::type;
    return run_reduce(t, s, into, ProdOp<T>{});
  });
}

template <bool IsMax>
Tensor minmax_impl(const Tensor& t, const Dims* dims, bool keepdim, const Tensor* into = nullptr) {
  const char* op = IsMax ? "max" : "min";
  ReduceSpec s = reduce_spec(t, dims, keepdim, op);
  check_nonempty(t, s, op, op);
  if (!t.device().is_cpu()) {
    if (into != nullptr) return Tensor();
    return reduce_on_device(t, s, IsMax ? cuda::ReduceKind::Max : cuda::ReduceKind::Min, op);
  }
  return dispatch_all(t.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return run_reduce(t, s, into, MinMaxOp<T, IsMax>{});
  });
}

template <bool IsMax>
Tensor arg_impl(const Tensor& t, std::optional<int64_t> dim, bool keepdim, const Tensor* into = nullptr) {
  const char* op = IsMax ? "argmax" : "argmin";
  check_data(t, op);
  Tensor in = t;
  ReduceSpec s;
  if (dim) {
    Dims d{*dim};
    s = reduce_spec(t, &d, keepdim, op);
    check_nonempty(t, s, op, op);
  } else {
    // The index into the flattened tensor: reduce a row-major 1-d copy or view.
    THD_CHECK(t.numel() != 0, ValueError, op,
              "Expected reduction dim to be specified for input.numel() == 0 (input shape {})",
              shape_str(t.shape()));
    s.all = true;
    s.n_red = t.numel();
    if (keepdim) s.out_shape.assign(static_cast<size_t>(t.dim()), 1);
    if (!t.device().is_cpu()) {
      // Every dim reduced in place of a flattened copy: the kernels count positions
      // row-major over all dims, which is the flat index.
      s.mask.assign(static_cast<size_t>(t.dim()), true);
    } else {
      in = t.reshape({-1});
      s.mask = {true};
    }
  }
  if (!t.device().is_cpu()) {
    if (into != nullptr) return Tensor();
    return reduce_on_device(in, s, IsMax ? cuda::ReduceKind::ArgMax : cuda::ReduceKind::ArgMin,
                            op);
  }
  return dispatch<kNumericSet>(t.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return run_reduce(in, s, into, ArgOp<T, IsMax>{});
  });
}

template <bool IsAny>
Tensor anyall_impl(const Tensor& t, const Dims* dims, bool keepdim, const Tensor* into = nullptr) {
  const char* op = IsAny ? "any" : "all";
  ReduceSpec s = reduce_spec(t, dims, keepdim, op);
  if (!t.device().is_cpu()) {
    if (into != nullptr) return Tensor();
    return reduce_on_device(t, s, IsAny ? cuda::ReduceKind::Any : cuda::ReduceKind::All, op);
  }
  return dispatch_all(t.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return run_reduce(t, s, into, AnyAllOp<T, IsAny>{});
  });
}

Tensor norm_impl(const Tensor& t, double p, const Dims* dims, bool keepdim, const Tensor* into = nullptr) {
  ReduceSpec s = reduce_spec(t, dims, keepdim, "norm");
  check_floating(t, "norm", "Expected a floating point tensor as input");
  if (std::isinf(p)) {
    check_nonempty(t, s, "norm", p > 0 ? "the inf norm" : "the -inf norm");
  }
  if (!t.device().is_cpu()) return into != nullptr ? Tensor() : reduce_on_device(t, s, cuda::ReduceKind::Norm, "norm", p);
  return dispatch<kFloatingSet>(t.dtype(), "norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (std::isinf(p)) {
      return p > 0 ? run_reduce(t, s, into, MinMaxOp<T, true, true>{})
                   : run_reduce(t, s, into, MinMaxOp<T, false, true>{});
    }
    if (p == 0) return run_reduce(t, s, into, sum_op<T, T>(MapNonZero{}, ProjCast<T>{}));
    if (p == 1) return run_reduce(t, s, into, sum_op<T, T>(MapAbs{}, ProjCast<T>{}));
    if (p == 2) return run_reduce(t, s, into, sum_op<T, T>(MapSquare{}, ProjSqrt<T>{}));
    return run_reduce(t, s, into, sum_op<T, T>(MapPowAbs{p}, ProjRoot<T>{1.0 / p}));
  });
}

Tensor var_impl(const Tensor& t, const Dims* dims, int64_t correction, bool keepdim,
                bool take_sqrt, const Tensor* into = nullptr) {
  const char* op = take_sqrt ? "std" : "var";
  ReduceSpec s = reduce_spec(t, dims, keepdim, op);
  check_floating(t, op, "std and var only support floating point and complex dtypes");
  if (!t.device().is_cpu()) {
    if (into != nullptr) return Tensor();
    return reduce_on_device(t, s, take_sqrt ? cuda::ReduceKind::Std : cuda::ReduceKind::Var, op,
                            2.0, correction);
  }
  return dispatch<kFloatingSet>(t.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const ReduceGeometry g = make_reduce_geometry(t, s.mask);
    const auto n = static_cast<double>(s.n_red);
    std::vector<double> mean(static_cast<size_t>(g.n_out));
    if (into != nullptr && !writable_result(*into, s.out_shape, t.dtype(), Device::cpu(), {&t})) return Tensor();
    reduce_kernel(g, sum_op<T, double>(MapId{}, ProjDiv<double>{n}), mean.data());
    Tensor out = into != nullptr ? *into : Tensor::empty(s.out_shape, t.dtype());
    reduce_kernel(g, VarOp<T>(mean.data(), n, static_cast<double>(correction), take_sqrt),
                  out.data<T>());
    return out;
  });
}

}  // namespace

Tensor Tensor::sum() const { return sum_impl(*this, nullptr, false); }
Tensor Tensor::sum(const Dims& dims, bool keepdim) const { return sum_impl(*this, &dims, keepdim); }
Tensor Tensor::mean() const { return mean_impl(*this, nullptr, false); }
Tensor Tensor::mean(const Dims& dims, bool keepdim) const {
  return mean_impl(*this, &dims, keepdim);
}
Tensor Tensor::prod() const { return prod_impl(*this, nullptr, false); }
Tensor Tensor::prod(const Dims& dims, bool keepdim) const {
  return prod_impl(*this, &dims, keepdim);
}
Tensor Tensor::max() const { return minmax_impl<true>(*this, nullptr, false); }
Tensor Tensor::max(const Dims& dims, bool keepdim) const {
  return minmax_impl<true>(*this, &dims, keepdim);
}
Tensor Tensor::min() const { return minmax_impl<false>(*this, nullptr, false); }
Tensor Tensor::min(const Dims& dims, bool keepdim) const {
  return minmax_impl<false>(*this, &dims, keepdim);
}
Tensor Tensor::argmax() const { return arg_impl<true>(*this, std::nullopt, false); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const {
  return arg_impl<true>(*this, dim, keepdim);
}
Tensor Tensor::argmin() const { return arg_impl<false>(*this, std::nullopt, false); }
Tensor Tensor::argmin(int64_t dim, bool keepdim) const {
  return arg_impl<false>(*this, dim, keepdim);
}
Tensor Tensor::norm(double p) const { return norm_impl(*this, p, nullptr, false); }
Tensor Tensor::norm(double p, const Dims& dims, bool keepdim) const {
  return norm_impl(*this, p, &dims, keepdim);
}
Tensor Tensor::var() const { return var_impl(*this, nullptr, 1, false, false); }
Tensor Tensor::var(const Dims& dims, int64_t correction, bool keepdim) const {
  return var_impl(*this, &dims, correction, keepdim, false);
}
Tensor Tensor::std() const { return var_impl(*this, nullptr, 1, false, true); }
Tensor Tensor::std(const Dims& dims, int64_t correction, bool keepdim) const {
  return var_impl(*this, &dims, correction, keepdim, true);
}
Tensor Tensor::any() const { return anyall_impl<true>(*this, nullptr, false); }
Tensor Tensor::any(const Dims& dims, bool keepdim) const {
  return anyall_impl<true>(*this, &dims, keepdim);
}
Tensor Tensor::all() const { return anyall_impl<false>(*this, nullptr, false); }
Tensor Tensor::all(const Dims& dims, bool keepdim) const {
  return anyall_impl<false>(*this, &dims, keepdim);
}

namespace detail {

// The same calls as the Tensor methods above, one for one, with `out` to write.
bool reduce_into(IntoReduce kind, const Tensor& out, const Tensor& a, const ReduceArgs& r) {
  if (!out.defined() || !a.defined() || !a.device().is_cpu()) return false;
  const Dims* dims = r.all_dims ? nullptr : &r.dims;
  const bool keep = !r.all_dims && r.keepdim;
  if (!r.all_dims && r.dims.empty() && (kind == IntoReduce::Argmax || kind == IntoReduce::Argmin)) return false;
  const int64_t dim = r.all_dims ? 0 : r.dims[0];
  const Dims none;
  Tensor written;
  switch (kind) {
    case IntoReduce::Sum: written = sum_impl(a, dims, keep, &out); break;
    case IntoReduce::Mean: written = mean_impl(a, dims, keep, &out); break;
    case IntoReduce::Prod: written = prod_impl(a, dims, keep, &out); break;
    case IntoReduce::Max: written = minmax_impl<true>(a, dims, keep, &out); break;
    case IntoReduce::Min: written = minmax_impl<false>(a, dims, keep, &out); break;
    case IntoReduce::Any: written = anyall_impl<true>(a, dims, keep, &out); break;
    case IntoReduce::All: written = anyall_impl<false>(a, dims, keep, &out); break;
    case IntoReduce::Argmax:
      written = r.all_dims ? arg_impl<true>(a, std::nullopt, false, &out) : arg_impl<true>(a, dim, keep, &out);
      break;
    case IntoReduce::Argmin:
      written = r.all_dims ? arg_impl<false>(a, std::nullopt, false, &out) : arg_impl<false>(a, dim, keep, &out);
      break;
    case IntoReduce::Norm: written = norm_impl(a, r.p, dims, keep, &out); break;
    case IntoReduce::Var: written = var_impl(a, r.all_dims ? &none : dims, r.correction, keep, false, &out); break;
    case IntoReduce::Std: written = var_impl(a, r.all_dims ? &none : dims, r.correction, keep, true, &out); break;
  }
  return written.defined();
}

}  // namespace detail

}  // namespace thd
