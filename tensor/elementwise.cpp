#include "tensor/elementwise.h"

#include "tensor/check.h"

namespace thd::detail {

ElementwisePlan plan_elementwise(const char* op, const std::vector<Tensor>& inputs,
                                 const std::vector<DType>& compute, DType result,
                                 const Tensor* self) {
  Shape shape;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_data(inputs[i], op, i == 0 ? "self" : "other");
    THD_CHECK(inputs[i].device() == inputs[0].device(), ValueError, op,
              "expected all tensors on one device, got {} and {}", inputs[0].device().str(),
              inputs[i].device().str());
    shape = i == 0 ? inputs[i].shape() : broadcast_shapes(shape, inputs[i].shape(), op);
  }
  ElementwisePlan plan;
  if (self != nullptr) {
    THD_CHECK(shape == self->shape(), ShapeError, op,
              "output with shape {} doesn't match the broadcast shape {}",
              shape_str(self->shape()), shape_str(shape));
    check_can_cast(result, self->dtype(), op);
    check_writable(*self, op);
    if (self->dtype() == result) {
      plan.out = *self;
    } else {
      plan.out = Tensor::empty(shape, result, self->device());
      plan.inplace_target = *self;
    }
  } else {
    plan.out = Tensor::empty(shape, result, inputs[0].device());
  }
  plan.inputs.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    Tensor t = in.dtype() == compute[i] ? in : in.to(compute[i]);
    plan.inputs.push_back(unalias_input(t, plan.out));
  }
  return plan;
}

}  // namespace thd::detail
