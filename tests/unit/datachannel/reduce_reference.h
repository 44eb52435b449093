// The reduction the collective tests check against: one element at a time, in
// the widest arithmetic, then stored (NaN propagates through min/max, integers wrap).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <thd/datachannel.h>

#include "tensor/dispatch.h"

namespace thd::test {

template <typename T>
T reduce_reference(T a, T b, ReduceOp op) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Max:
      case ReduceOp::BOr: return a || b;
      case ReduceOp::Prod:
      case ReduceOp::Min:
      case ReduceOp::BAnd: return a && b;
      case ReduceOp::BXor: return a != b;
      case ReduceOp::Avg: break;
    }
  } else if constexpr (detail::is_float_v<T>) {
    using C = detail::compute_t<T>;
    const C x = static_cast<C>(a), y = static_cast<C>(b);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: return T(x + y);
      case ReduceOp::Prod: return T(x * y);
      case ReduceOp::Min:
        return std::isnan(x) || std::isnan(y) ? T(std::numeric_limits<C>::quiet_NaN()) : T(std::min(x, y));
      case ReduceOp::Max:
        return std::isnan(x) || std::isnan(y) ? T(std::numeric_limits<C>::quiet_NaN()) : T(std::max(x, y));
      default: break;
    }
  } else {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ReduceOp::Sum: return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case ReduceOp::Prod:
        return static_cast<T>(static_cast<U>(static_cast<uint64_t>(static_cast<U>(a)) * static_cast<U>(b)));
      case ReduceOp::Min: return std::min(a, b);
      case ReduceOp::Max: return std::max(a, b);
      case ReduceOp::BAnd: return static_cast<T>(a & b);
      case ReduceOp::BOr: return static_cast<T>(a | b);
      case ReduceOp::BXor: return static_cast<T>(a ^ b);
      case ReduceOp::Avg: break;
    }
  }
  ADD_FAILURE() << "no reference for this op";
  return T{};
}

}  // namespace thd::test
