// The reductions as device functors, with the CPU's semantics (tensor/reduce.cpp):
// the same accumulator types (double for floating sums, int64 wrapping for integer
// ones), the same NaN rules and the same projections. An Op provides
//   in_t, acc_t, out_t
//   acc_t identity() const;
//   Op at(int64_t out) const;                  // the op for output offset `out`
//   acc_t fold(acc_t a, in_t x, int64_t r) const;   // r: position among reduced dims
//   acc_t combine(acc_t a, acc_t b) const;     // associative; commutative up to rounding
//   out_t project(acc_t a) const;
// and may add fold_pack(acc_t, const Pack<in_t>&, int64_t r) for a 16-byte vector.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/reduce_pack.cuh"

namespace thd::cuda::reduce_detail {

template <typename T>
using sum_acc_t = std::conditional_t<is_float_v<T>, double, int64_t>;
// sum and prod give int64 for integer and bool inputs.
template <typename T>
using sum_out_t = std::conditional_t<is_float_v<T>, T, int64_t>;

// Integer sums and products wrap around like torch's; unsigned arithmetic makes that
// defined behaviour.
__device__ __forceinline__ int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
__device__ __forceinline__ int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// double to the result type as the CPU narrows it: to a 16-bit float through float
// (two roundings, which a direct conversion would not always reproduce).
template <typename Out, typename From>
__device__ __forceinline__ Out narrow(From v) {
  if constexpr (is_reduced_float_v<Out> && std::is_same_v<From, double>) {
    return convert<Out>(static_cast<float>(v));
  } else {
    return convert<Out>(v);
  }
}

template <typename C>
__device__ __forceinline__ C abs_of(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return fabsf(x);
  } else {
    return fabs(x);
  }
}

// ---- sums: sum, mean, the finite norms, var's mean ----------------------------------

// What a floating sum adds up, in double as the CPU does. A runtime kind rather than
// a type per norm: one kernel serves every p.
struct SumMap {
  enum Kind : int { kId, kAbs, kSquare, kNonZero, kPowAbs };
  Kind kind = kId;
  double p = 0;

  __device__ __forceinline__ double operator()(double x) const {
    switch (kind) {
      case kId: return x;
      case kAbs: return fabs(x);
      case kSquare: return x * x;
      case kNonZero: return x != 0 ? 1.0 : 0.0;
      case kPowAbs: return pow(fabs(x), p);
    }
    return x;
  }
};

// How the double sum becomes the result.
struct SumProjection {
  enum Kind : int { kCast, kDiv, kSqrt, kRoot };
  Kind kind = kCast;
  double value = 1;  // the divisor, or 1 / p

  __device__ __forceinline__ double operator()(double a) const {
    switch (kind) {
      case kCast: return a;
      case kDiv: return a / value;
      case kSqrt: return sqrt(a);
      case kRoot: return pow(a, value);
    }
    return a;
  }
};

// Integer and bool inputs: wrapping int64 sums (map and projection do not apply).
template <typename T, typename Out>
struct SumOp {
  using in_t = T;
  using acc_t = sum_acc_t<T>;
  using out_t = Out;
  using C = compute_t<T>;

  SumMap map;
  SumProjection proj;

  __device__ acc_t identity() const { return 0; }
  __device__ SumOp at(int64_t) const { return *this; }
  __device__ __forceinline__ acc_t fold(acc_t a, T x, int64_t) const {
    if constexpr (is_float_v<T>) {
      return a + map(static_cast<double>(to_compute(x)));
    } else {
      return wrap_add(a, static_cast<int64_t>(x));
    }
  }
  // A plain sum of float32 or 16-bit values adds a vector's elements pairwise in
  // float (as the CPU's float lanes do) and converts once to double.
  __device__ __forceinline__ acc_t fold_pack(acc_t a, const Pack<T>& pk, int64_t r) const {
    if constexpr (std::is_same_v<C, float>) {
      if (map.kind == SumMap::kId) {
        float s[Pack<T>::kSize];
#pragma unroll
        for (int j = 0; j < Pack<T>::kSize; ++j) s[j] = to_compute(pk.v[j]);
#pragma unroll
        for (int w = Pack<T>::kSize / 2; w > 0; w /= 2) {
#pragma unroll
          for (int j = 0; j < w; ++j) s[j] += s[j + w];
        }
        return a + static_cast<double>(s[0]);
      }
    }
#pragma unroll
    for (int j = 0; j < Pack<T>::kSize; ++j) a = fold(a, pk.v[j], r + j);
    return a;
  }
  __device__ __forceinline__ acc_t combine(acc_t a, acc_t b) const {
    if constexpr (is_float_v<T>) {
      return a + b;
    } else {
      return wrap_add(a, b);
    }
  }
  __device__ Out project(acc_t a) const {
    if constexpr (is_float_v<T>) {
      return narrow<Out>(proj(a));
    } else {
      return narrow<Out>(a);
    }
  }
};

template <typename T>
struct ProdOp {
  using in_t = T;
  using acc_t = sum_acc_t<T>;
  using out_t = sum_out_t<T>;

  __device__ acc_t identity() const { return 1; }
  __device__ ProdOp at(int64_t) const { return *this; }
  __device__ __forceinline__ acc_t fold(acc_t a, T x, int64_t) const {
    return combine(a, static_cast<acc_t>(to_compute(x)));
  }
  __device__ __forceinline__ acc_t combine(acc_t a, acc_t b) const {
    if constexpr (is_float_v<T>) {
      return a * b;
    } else {
      return wrap_mul(a, b);
    }
  }
  __device__ out_t project(acc_t a) const { return narrow<out_t>(a); }
};

// ---- extremes: max, min, the inf norms ------------------------------------------------

// NaN wins: once seen it stays. Abs: of |x| (the inf norms).
template <typename T, bool IsMax, bool Abs = false>
struct ExtremeOp {
  using in_t = T;
  using C = compute_t<T>;
  using acc_t = C;
  using out_t = T;

  __device__ acc_t identity() const {
    if constexpr (std::is_same_v<C, bool>) {
      return !IsMax;
    } else if constexpr (is_float_v<T>) {
      return IsMax ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
    } else {
      return IsMax ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
    }
  }
  __device__ ExtremeOp at(int64_t) const { return *this; }
  __device__ __forceinline__ acc_t combine(C a, C x) const {
    if constexpr (is_float_v<T>) {
      return ((IsMax ? x > a : x < a) || x != x) ? x : a;
    } else {
      return (IsMax ? x > a : x < a) ? x : a;
    }
  }
  __device__ __forceinline__ acc_t fold(acc_t a, T x, int64_t) const {
    C v = to_compute(x);
    if constexpr (Abs) v = abs_of(v);
    return combine(a, v);
  }
  __device__ out_t project(acc_t a) const { return convert<T>(a); }
};

// ---- argmax / argmin -----------------------------------------------------------------

template <typename C>
struct ArgAcc {
  C value;
  int64_t index;  // -1: nothing seen yet
};

// The first extreme; NaN counts as the extreme, the first NaN wins. The order is
// total over (value, index), so any combining order gives the CPU's answer.
template <typename T, bool IsMax>
struct ArgOp {
  using in_t = T;
  using C = compute_t<T>;
  using acc_t = ArgAcc<C>;
  using out_t = int64_t;

  // Does (x, xi) replace (y, yi)?
  __device__ __forceinline__ static bool beats(C x, int64_t xi, C y, int64_t yi) {
    if constexpr (is_float_v<T>) {
      if (y != y) return x != x && xi < yi;
      if (x != x) return true;
    }
    if (IsMax ? x > y : x < y) return true;
    return x == y && xi < yi;
  }
  __device__ acc_t identity() const { return {C(), -1}; }
  __device__ ArgOp at(int64_t) const { return *this; }
  __device__ __forceinline__ acc_t fold(acc_t a, T x, int64_t r) const {
    const C v = to_compute(x);
    return (a.index < 0 || beats(v, r, a.value, a.index)) ? acc_t{v, r} : a;
  }
  __device__ __forceinline__ acc_t combine(acc_t a, acc_t b) const {
    if (b.index < 0) return a;
    return (a.index < 0 || beats(b.value, b.index, a.value, a.index)) ? b : a;
  }
  __device__ out_t project(acc_t a) const { return a.index; }
};

// ---- any / all ------------------------------------------------------------------------

template <typename T, bool IsAny>
struct AnyAllOp {
  using in_t = T;
  using acc_t = bool;
  using out_t = bool;

  __device__ acc_t identity() const { return !IsAny; }
  __device__ AnyAllOp at(int64_t) const { return *this; }
  __device__ __forceinline__ acc_t fold(bool a, T x, int64_t) const {
    const bool nz = to_compute(x) != compute_t<T>(0);
    return IsAny ? (a || nz) : (a && nz);
  }
  __device__ __forceinline__ acc_t combine(bool a, bool b) const {
    return IsAny ? (a || b) : (a && b);
  }
  __device__ out_t project(bool a) const { return a; }
};

// ---- var / std -----------------------------------------------------------------------

// Second pass of var/std, after a first that wrote each output's mean: squared
// deviations plus the plain deviations, whose sum corrects the rounding of the mean
// (the corrected two-pass algorithm, as on the CPU).
struct VarAcc {
  double sq;
  double dev;
};

template <typename T>
struct VarOp {
  using in_t = T;
  using acc_t = VarAcc;
  using out_t = T;

  const double* means = nullptr;  // per output offset
  double n = 0;
  double correction = 1;
  bool take_sqrt = false;
  double mean = 0;  // of the output at() chose

  __device__ acc_t identity() const { return {0, 0}; }
  __device__ VarOp at(int64_t out) const {
    VarOp op = *this;
    op.mean = means[out];
    return op;
  }
  __device__ __forceinline__ acc_t fold(acc_t a, T x, int64_t) const {
    const double d = static_cast<double>(to_compute(x)) - mean;
    return {a.sq + d * d, a.dev + d};
  }
  __device__ __forceinline__ acc_t combine(acc_t a, acc_t b) const {
    return {a.sq + b.sq, a.dev + b.dev};
  }
  __device__ out_t project(acc_t a) const {
    double m2 = a.sq - a.dev * a.dev / n;
    if (m2 < 0) m2 = 0;
    // torch divides by max(0, N - correction): no degrees of freedom gives inf, or
    // nan when the deviations are 0 too.
    const double divisor = n > correction ? n - correction : 0.0;
    const double v = m2 / divisor;
    return narrow<T>(take_sqrt ? sqrt(v) : v);
  }
};

}  // namespace thd::cuda::reduce_detail
