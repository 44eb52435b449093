// The loops are written for GCC's vectorizer (this file is built with -O3): one
// flat loop per (type, op), no calls, branches as selects. out may alias a or b,
// which the vectorizer handles with a runtime overlap check.
#include "datachannel/collectives/reduce_kernels.h"

#include <algorithm>
#include <string>

#include "tensor/check.h"
#include "tensor/dispatch.h"
#include "tensor/int_math.h"

namespace thd::detail {

namespace {

template <typename T, typename F>
void zip(T* out, const T* a, const T* b, size_t count, F f) {
  for (size_t i = 0; i < count; ++i) out[i] = f(a[i], b[i]);
}

// torch.minimum / torch.maximum: a NaN operand makes the result NaN.
template <typename T>
inline T min_propagating_nan(T x, T y) {
  return (x < y || x != x) ? x : y;
}
template <typename T>
inline T max_propagating_nan(T x, T y) {
  return (x > y || x != x) ? x : y;
}

template <typename T>  // float, double
void reduce_floating(T* out, const T* a, const T* b, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return zip(out, a, b, count, [](T x, T y) { return x + y; });
    case ReduceOp::Prod: return zip(out, a, b, count, [](T x, T y) { return x * y; });
    case ReduceOp::Min: return zip(out, a, b, count, [](T x, T y) { return min_propagating_nan(x, y); });
    case ReduceOp::Max: return zip(out, a, b, count, [](T x, T y) { return max_propagating_nan(x, y); });
    case ReduceOp::BAnd:
    case ReduceOp::BOr:
    case ReduceOp::BXor: break;  // refused by check_reduce_op
  }
}

// 16-bit floats: through float, a block at a time, so the float loop vectorizes
// and the block stays in L1.
template <typename T>  // Half, BFloat16
void reduce_reduced_float(T* out, const T* a, const T* b, size_t count, ReduceOp op) {
  constexpr size_t kBlock = 512;
  float fa[kBlock];
  float fb[kBlock];
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t m = std::min(kBlock, count - start);
    for (size_t i = 0; i < m; ++i) fa[i] = T::to_float(a[start + i].bits);
    for (size_t i = 0; i < m; ++i) fb[i] = T::to_float(b[start + i].bits);
    reduce_floating(fa, fa, fb, m, op);
    for (size_t i = 0; i < m; ++i) out[start + i].bits = T::from_float(fa[i]);
  }
}

template <typename T>  // uint8, int8, int32, int64: wrapping like the hardware
void reduce_integer(T* out, const T* a, const T* b, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return zip(out, a, b, count, [](T x, T y) { return wrapping_add(x, y); });
    case ReduceOp::Prod: return zip(out, a, b, count, [](T x, T y) { return wrapping_mul(x, y); });
    case ReduceOp::Min: return zip(out, a, b, count, [](T x, T y) { return std::min(x, y); });
    case ReduceOp::Max: return zip(out, a, b, count, [](T x, T y) { return std::max(x, y); });
    case ReduceOp::BAnd: return zip(out, a, b, count, [](T x, T y) { return static_cast<T>(x & y); });
    case ReduceOp::BOr: return zip(out, a, b, count, [](T x, T y) { return static_cast<T>(x | y); });
    case ReduceOp::BXor: return zip(out, a, b, count, [](T x, T y) { return static_cast<T>(x ^ y); });
    case ReduceOp::Avg: break;  // refused by check_reduce_op
  }
}

// bool as its bytes (any nonzero byte is true), so a stray value is not UB and
// the loops vectorize as byte loops; results are always 0 or 1.
void reduce_bool(uint8_t* out, const uint8_t* a, const uint8_t* b, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Max:
    case ReduceOp::BOr:
      return zip(out, a, b, count, [](uint8_t x, uint8_t y) { return static_cast<uint8_t>((x | y) != 0); });
    case ReduceOp::Prod:
    case ReduceOp::Min:
    case ReduceOp::BAnd:
      return zip(out, a, b, count, [](uint8_t x, uint8_t y) { return static_cast<uint8_t>((x != 0) & (y != 0)); });
    case ReduceOp::BXor:
      return zip(out, a, b, count, [](uint8_t x, uint8_t y) { return static_cast<uint8_t>((x != 0) ^ (y != 0)); });
    case ReduceOp::Avg: break;  // refused by check_reduce_op
  }
}

template <typename T>
void divide(T* data, size_t count, T by) {
  for (size_t i = 0; i < count; ++i) data[i] = data[i] / by;
}

}  // namespace

void check_reduce_op(DType dtype, ReduceOp op, std::string_view caller) {
  const bool floating = is_floating_point(dtype);
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Prod:
    case ReduceOp::Min:
    case ReduceOp::Max: return;
    case ReduceOp::Avg:
      if (floating) return;
      THD_THROW(TypeError, std::string(caller),
                "reduce op {} does not apply to {}: it is for floating-point dtypes only (use sum and divide, "
                "or convert to a floating-point dtype first)",
                reduce_op_name(op), dtype);
    case ReduceOp::BAnd:
    case ReduceOp::BOr:
    case ReduceOp::BXor:
      if (!floating) return;
      THD_THROW(TypeError, std::string(caller),
                "reduce op {} does not apply to {}: bitwise ops are for integer and bool dtypes only",
                reduce_op_name(op), dtype);
  }
  THD_THROW(ValueError, std::string(caller), "unknown reduce op code {}", static_cast<int>(op));
}

void reduce_into(void* acc, const void* in, size_t count, DType dtype, ReduceOp op) {
  reduce_into(acc, acc, in, count, dtype, op);
}

void reduce_into(void* out, const void* a, const void* b, size_t count, DType dtype, ReduceOp op) {
  check_reduce_op(dtype, op, "reduce_into");
  if (count == 0) return;
  if (dtype == DType::Bool) {
    return reduce_bool(static_cast<uint8_t*>(out), static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b),
                       count, op);
  }
  dispatch<kNumericSet>(dtype, "reduce_into", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto* o = static_cast<T*>(out);
    const auto* x = static_cast<const T*>(a);
    const auto* y = static_cast<const T*>(b);
    if constexpr (is_reduced_float_v<T>) {
      reduce_reduced_float(o, x, y, count, op);
    } else if constexpr (std::is_floating_point_v<T>) {
      reduce_floating(o, x, y, count, op);
    } else {
      reduce_integer(o, x, y, count, op);
    }
  });
}

void finish_reduce(void* data, size_t count, DType dtype, ReduceOp op, int group_size) {
  if (op != ReduceOp::Avg || count == 0) return;
  check_reduce_op(dtype, op, "finish_reduce");
  dispatch<kFloatingSet>(dtype, "finish_reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto* d = static_cast<T*>(data);
    if constexpr (is_reduced_float_v<T>) {
      constexpr size_t kBlock = 512;
      float f[kBlock];
      const auto by = static_cast<float>(group_size);
      for (size_t start = 0; start < count; start += kBlock) {
        const size_t m = std::min(kBlock, count - start);
        for (size_t i = 0; i < m; ++i) f[i] = T::to_float(d[start + i].bits);
        divide(f, m, by);
        for (size_t i = 0; i < m; ++i) d[start + i].bits = T::from_float(f[i]);
      }
    } else {
      divide(d, count, static_cast<T>(group_size));
    }
  });
}

}  // namespace thd::detail
