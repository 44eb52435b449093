// The CPU launch of a comparison (eq ... ge): operands of compute dtype `c`, a bool
// result, for the ops that allocate it (compare_ops.cpp) and those writing an
// existing tensor (into_elementwise.cpp).
#pragma once

#include "tensor/dispatch.h"
#include "tensor/elementwise.h"

namespace thd::detail {

template <typename Op, typename Plan>
void launch_compare(const char* op, DType c, const Plan& plan) {
  dispatch_all(c, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_kernel<bool, T>(plan, Op{});
  });
}

}  // namespace thd::detail
