#include "datachannel/collectives/float32_accumulation.h"

#include <bit>
#include <cstdint>
#include <type_traits>

#include <thd/tensor.h>

#include "tensor/check.h"
#include "tensor/dispatch.h"

namespace thd::detail {

namespace {

// Scratch from the caching allocator: cheap to take and give back per call.
Tensor float_scratch(size_t count) { return Tensor::empty({static_cast<int64_t>(count)}, kFloat32); }

float* floats_of(const Tensor& t) { return static_cast<float*>(t.data_ptr()); }

// Half::to_float and Half::from_float, bit for bit, with every case computed and
// the result picked by masks, so the loops below vectorize (the branchy forms ran
// at about 0.5 GB/s, slower than the network they feed). Masks, not ?:, because
// under -ftrapping-math GCC keeps a float operation inside its branch.
inline uint32_t pick(bool c, uint32_t if_true, uint32_t if_false) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return (if_true & m) | (if_false & ~m);
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  const uint32_t inf_nan = sign | 0x7f800000u | (mant << 13);
  const uint32_t normal = sign | ((exp + 112u) << 23) | (mant << 13);
  // Subnormal: mant * 2^-24, exact in float.
  const uint32_t subnormal = sign | std::bit_cast<uint32_t>(static_cast<float>(mant) * 5.9604644775390625e-08f);
  const uint32_t out = pick(exp == 0x1fu, inf_nan, pick(exp == 0, subnormal, normal));
  return std::bit_cast<float>(out);
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  const uint32_t inf_nan = sign | 0x7c00u | pick(abs > 0x7f800000u, 0x200u, 0u);
  const uint32_t overflow = sign | 0x7c00u;
  const float aligned = std::bit_cast<float>(abs) + 0.5f;  // the FPU rounds the subnormal
  const uint32_t subnormal = sign | (std::bit_cast<uint32_t>(aligned) - 0x3f000000u);
  const uint32_t normal = sign | ((abs + 0xc8000fffu + ((abs >> 13) & 1u)) >> 13);
  const uint32_t out =
      pick(abs >= 0x7f800000u, inf_nan, pick(abs >= 0x477ff000u, overflow, pick(abs < 0x38800000u, subnormal, normal)));
  return static_cast<uint16_t>(out);
}

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
      if constexpr (std::is_same_v<T, Half>) {
        for (size_t i = 0; i < count; ++i) out[i] = half_to_float(src[i].bits);
      } else {
        for (size_t i = 0; i < count; ++i) out[i] = T::to_float(src[i].bits);
      }
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
      if constexpr (std::is_same_v<T, Half>) {
        for (size_t i = 0; i < count; ++i) dst[i].bits = float_to_half(in[i]);
      } else {
        for (size_t i = 0; i < count; ++i) dst[i].bits = T::from_float(in[i]);
      }
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
