// The functor and name of each IntoBinary op, in one place for the flat path
// (binary_ops.cpp) and the general one (into_elementwise.cpp).
#pragma once

#include <type_traits>

#include "tensor/functors/binary.h"
#include "tensor/into.h"

namespace thd::detail {

// Calls f(Op{}, "name") for `op`'s functor and returns what it returns.
template <typename F>
bool with_into_binary(IntoBinary op, F&& f) {
  switch (op) {
    case IntoBinary::Add: return f(functors::AddOp{}, "add");
    case IntoBinary::Sub: return f(functors::SubOp{}, "sub");
    case IntoBinary::Mul: return f(functors::MulOp{}, "mul");
    case IntoBinary::Div: return f(functors::DivOp{}, "div");
    case IntoBinary::Maximum: return f(functors::MaximumOp{}, "maximum");
    case IntoBinary::Minimum: return f(functors::MinimumOp{}, "minimum");
  }
  return false;
}

// maximum and minimum take a tensor only, as the ops do.
template <typename Op>
inline constexpr bool kIntoTakesScalar =
    !std::is_same_v<Op, functors::MaximumOp> && !std::is_same_v<Op, functors::MinimumOp>;

}  // namespace thd::detail
