// CUDA kernels of where and clamp (elementwise_kernels.h).
#include "tensor/cuda/elementwise_ops.cuh"

namespace thd::cuda {

void clamp(const char* op, DType dtype, const Tensor& out, const Tensor& in,
           const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  dispatch<thd::detail::kNumericSet>(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    // Bounds are rounded to the dtype first, as torch does (and the CPU).
    const functors::ClampOp<C> f{lo ? to_compute(scalar_as<T>(*lo)) : C(0),
                                 hi ? to_compute(scalar_as<T>(*hi)) : C(0), lo.has_value(),
                                 hi.has_value()};
    launch_elementwise<T>(op, f, out, tensor_input<T>(in));
  });
}

void where(const Tensor& out, const Tensor& cond, const Operand& a, const Operand& b) {
  dispatch<thd::detail::kAllSet>(out.dtype(), "where", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise<T>("where", functors::WhereOp{}, out, tensor_input<bool>(cond),
                          input_of<T>(a), input_of<T>(b));
  });
}

}  // namespace thd::cuda
