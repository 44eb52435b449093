// Shared driver of the elementwise ops: broadcasting, type promotion, output
// allocation, in-place checks and aliasing, then one typed kernel call.
//
// Two ways in. plan_flat() takes the common case (operands of one contiguous shape
// and already of the compute dtype, as a worker's `c = a + b` on small tensors) with
// a few comparisons and no allocation besides the output: the kernel then walks one
// flat range. Everything else, and every error, goes through plan_elementwise().
// Both lead to the same typed loops (loops.h), so their results are identical.
//
// CUDA tensors are planned by plan_elementwise too, then run the kernels of
// tensor/cuda/elementwise_kernels.h on the plan's operands (on_cuda picks the path).
#pragma once

#include <array>
#include <cstddef>
#include <optional>

#include <thd/config.h>
#include <thd/tensor.h>

#include "tensor/loops.h"
#include "tensor/op_util.h"
#include "tensor/shape_util.h"
#include "tensor/storage_alloc.h"

namespace thd::detail {

inline constexpr bool kWithCuda = THD_WITH_CUDA;

// Whether an op whose operands include t runs its CUDA kernels: t is on a CUDA device.
// (Any other operand on another device is refused by plan_elementwise.) In a build
// without CUDA only foreign memory can be labelled CUDA: NotImplementedError, before
// a CPU loop would read it. Call sites put the CUDA call under
// `if constexpr (kWithCuda)`, so a build without CUDA needs no CUDA kernels.
inline bool on_cuda(const char* op, const Tensor& t) {
  if (t.device().is_cpu()) [[likely]] return false;
  if constexpr (!kWithCuda) check_cpu_kernel(op, t);
  return true;
}

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

// Operands laid out flat by plan_flat.
// (No default member initialisers: plan_flat sets every field, and zeroing the
// arrays first shows up in the profile of a 16-element add.)
template <size_t N>
struct FlatPlan {
  Tensor out;                   // the new output; undefined when the op writes *self
  std::array<char*, N> base;    // the output, then the inputs
  std::array<int64_t, N> step;  // bytes per element; 0 for a 0-dim input all elements read
  int64_t numel;
};

// a == b for the short shapes of small ops, without the library call vector's ==
// makes (memcmp's setup costs more than comparing one or two dims).
inline bool same_shape(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// The case plan_elementwise would turn into one flat run, recognised cheaply: every
// input is contiguous and has dtype `compute`, the dimensioned inputs share one shape
// (0-dim inputs are read as scalars), there is at least one element and, in place,
// self is contiguous with that shape and dtype `result` and every input is self
// itself or shares none of its memory. Returns nullopt for anything else: then
// plan_elementwise decides, and raises any error. Inputs must be defined.
template <size_t NIn>
std::optional<FlatPlan<NIn + 1>> plan_flat(const std::array<const Tensor*, NIn>& inputs,
                                           DType compute, DType result,
                                           const Tensor* self = nullptr) {
  static_assert(NIn > 0);
  const Shape* shape = nullptr;  // of the dimensioned inputs, if any
  for (const Tensor* in : inputs) {
    if (in->dtype() != compute || !in->is_contiguous()) return std::nullopt;
    if (in->dim() == 0) continue;
    if (shape == nullptr) {
      shape = &in->shape();
    } else if (!same_shape(in->shape(), *shape)) {
      return std::nullopt;
    }
  }
  // Read from the storages (inputs are defined), not through the checked accessors:
  // this runs for every small op. A meta input goes the general way, which refuses it.
  const Device device = inputs[0]->storage()->device();
  for (const Tensor* in : inputs) {
    if (in->storage()->device() != device || in->storage()->is_meta()) return std::nullopt;
  }
  const Shape& out_shape = shape != nullptr ? *shape : inputs[0]->shape();  // 0-dim
  int64_t numel = 1;
  for (int64_t s : out_shape) numel *= s;
  if (numel == 0) return std::nullopt;
  FlatPlan<NIn + 1> plan;  // default-initialised: every field is set below
  plan.numel = numel;
  if (self != nullptr) {
    // Contiguous with elements means no dim of stride 0: self is writable.
    if (self->dtype() != result || !same_shape(self->shape(), out_shape) ||
        !self->is_contiguous() || self->device() != device) {
      return std::nullopt;
    }
    for (const Tensor* in : inputs) {
      if (in != self && !same_view(*in, *self) && memory_overlaps(*in, *self)) {
        return std::nullopt;
      }
    }
    plan.base[0] = static_cast<char*>(self->data_ptr());
  } else {
    // The shape is an input's: its element count is known to be valid.
    plan.out = Tensor(allocate_storage(static_cast<size_t>(numel) * element_size(result), device), result,
                      out_shape, contiguous_strides(out_shape), 0);
    plan.base[0] = static_cast<char*>(plan.out.storage()->data());
  }
  plan.step[0] = static_cast<int64_t>(element_size(result));
  const auto in_step = static_cast<int64_t>(element_size(compute));
  for (size_t k = 0; k < NIn; ++k) {
    const Tensor& in = *inputs[k];
    plan.base[k + 1] = static_cast<char*>(in.storage()->data()) + in.storage_offset() * in_step;
    plan.step[k + 1] = in.dim() == 0 ? 0 : in_step;
  }
  return plan;
}

// The typed kernels of loops.h over either kind of plan.
template <typename Out, typename In, typename F>
void unary_kernel(const ElementwisePlan& plan, F f) {
  unary_kernel<Out, In>(plan.out, plan.inputs[0], f);
}

template <typename Out, typename In, typename F>
void binary_kernel(const ElementwisePlan& plan, F f) {
  binary_kernel<Out, In>(plan.out, plan.inputs[0], plan.inputs[1], f);
}

template <typename Out, typename In, typename F>
void unary_kernel(const FlatPlan<2>& plan, F f) {
  for_each_flat<2>(plan.base, plan.step, plan.numel,
                   [&](char** p, const int64_t* s, int64_t n) { unary_run<Out, In>(p, s, n, f); });
}

template <typename Out, typename In, typename F>
void binary_kernel(const FlatPlan<3>& plan, F f) {
  for_each_flat<3>(plan.base, plan.step, plan.numel,
                   [&](char** p, const int64_t* s, int64_t n) { binary_run<Out, In>(p, s, n, f); });
}

// out = f(a, b) for the tensor of a one-input plan and a scalar b (as a 0-dim tensor
// holding b would be read), without making that tensor.
template <typename Out, typename In, typename F>
void binary_kernel(const FlatPlan<2>& plan, const In& b, F f) {
  const std::array<char*, 3> base{plan.base[0], plan.base[1],
                                  const_cast<char*>(reinterpret_cast<const char*>(&b))};
  const std::array<int64_t, 3> step{plan.step[0], plan.step[1], 0};
  for_each_flat<3>(base, step, plan.numel,
                   [&](char** p, const int64_t* s, int64_t n) { binary_run<Out, In>(p, s, n, f); });
}

}  // namespace thd::detail
