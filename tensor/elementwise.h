// Shared driver of the elementwise ops: broadcasting, type promotion, output
// allocation, in-place checks and aliasing, then one typed kernel call.
#pragma once

#include <optional>

#include <thd/tensor.h>

#include "tensor/loops.h"
#include "tensor/op_util.h"
#include "tensor/shape_util.h"

namespace thd::detail {

// Operands of an elementwise op, ready for a kernel: inputs converted to the compute
// dtype and safe to read while `out` is written.
struct ElementwisePlan {
  Tensor out;
  std::vector<Tensor> inputs;
  // When the op runs in place on a tensor whose dtype differs from the result
  // dtype, the kernel writes `out` (a temporary) and finish() copies it back.
  Tensor inplace_target;

  Tensor finish() {
    if (inplace_target.defined()) {
      inplace_target.copy_(out);
      return inplace_target;
    }
    return out;
  }
};

// inputs: the operands; compute[i]: the dtype input i is read as. result: the dtype of
// a new output. self: for in-place ops, the tensor written (its shape must be the
// broadcast shape and `result` must cast to its dtype).
ElementwisePlan plan_elementwise(const char* op, const std::vector<Tensor>& inputs,
                                 const std::vector<DType>& compute, DType result,
                                 const Tensor* self = nullptr);

// The common case: every input read as `compute`.
inline ElementwisePlan plan_elementwise(const char* op, const std::vector<Tensor>& inputs,
                                        DType compute, DType result,
                                        const Tensor* self = nullptr) {
  return plan_elementwise(op, inputs, std::vector<DType>(inputs.size(), compute), result, self);
}

}  // namespace thd::detail
