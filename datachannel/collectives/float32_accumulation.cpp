#include "datachannel/collectives/float32_accumulation.h"

#include <thd/tensor.h>

#include "tensor/check.h"
#include "tensor/dispatch.h"

namespace thd::detail {

namespace {

// Scratch from the caching allocator: cheap to take and give back per call.
Tensor float_scratch(size_t count) { return Tensor::empty({static_cast<int64_t>(count)}, kFloat32); }

float* floats_of(const Tensor& t) { return static_cast<float*>(t.data_ptr()); }

}  // namespace

bool accumulates_in_float32(DType dtype, ReduceOp op) {
  if (dtype != DType::Float16 && dtype != DType::BFloat16) return false;
  return op == ReduceOp::Sum || op == ReduceOp::Avg || op == ReduceOp::Prod;
}

size_t float32_accumulation_bytes(DType dtype, ReduceOp op, size_t elements, size_t out_elements) {
  if (!accumulates_in_float32(dtype, op)) return 0;
  return (elements + out_elements) * sizeof(float);
}

void widen_to_float32(const void* in, float* out, size_t count, DType dtype) {
  dispatch<kFloatingSet>(dtype, "widen_to_float32", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_reduced_float_v<T>) {
      const auto* src = static_cast<const T*>(in);
      for (size_t i = 0; i < count; ++i) out[i] = T::to_float(src[i].bits);
    } else {
      THD_THROW(TypeError, "widen_to_float32", "{} is not a 16-bit floating-point dtype", dtype);
    }
  });
}

void narrow_from_float32(const float* in, void* out, size_t count, DType dtype) {
  dispatch<kFloatingSet>(dtype, "narrow_from_float32", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_reduced_float_v<T>) {
      auto* dst = static_cast<T*>(out);
      for (size_t i = 0; i < count; ++i) dst[i].bits = T::from_float(in[i]);
    } else {
      THD_THROW(TypeError, "narrow_from_float32", "{} is not a 16-bit floating-point dtype", dtype);
    }
  });
}

void reduce_in_float32(void* data, size_t count, DType dtype, bool write_back,
                       const std::function<void(float* wide)>& reduce) {
  const Tensor wide = float_scratch(count);
  widen_to_float32(data, floats_of(wide), count, dtype);
  reduce(floats_of(wide));
  if (write_back) narrow_from_float32(floats_of(wide), data, count, dtype);
}

void reduce_in_float32(const void* in, size_t in_count, void* out, size_t out_count, DType dtype,
                       const std::function<void(const float* wide_in, float* wide_out)>& reduce) {
  const Tensor wide = float_scratch(in_count + out_count);
  float* wide_in = floats_of(wide);
  float* wide_out = wide_in + in_count;
  widen_to_float32(in, wide_in, in_count, dtype);
  reduce(wide_in, wide_out);
  narrow_from_float32(wide_out, out, out_count, dtype);
}

}  // namespace thd::detail
