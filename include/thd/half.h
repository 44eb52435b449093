// 16-bit floating-point storage types. Arithmetic on them happens in float32
// (the kernels convert on load and store); these types only store and convert.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace thd {

// IEEE 754 binary16.
struct Half {
  uint16_t bits = 0;

  constexpr Half() = default;
  Half(float value) : bits(from_float(value)) {}  // NOLINT: implicit like float
  operator float() const { return to_float(bits); }  // NOLINT

  static constexpr Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }

  // Round to nearest even, overflow to inf, NaN stays NaN.
  static uint16_t from_float(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) {  // inf or NaN
      return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    }
    if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow
      return static_cast<uint16_t>(sign | 0x7c00u);
    }
    if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
      // Adding 0.5 (as float) aligns the mantissa so the FPU rounds for us.
      float r = std::bit_cast<float>(abs) + 0.5f;
      return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(r) - 0x3f000000u));
    }
    uint32_t mant_odd = (abs >> 13) & 1u;
    abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
    return static_cast<uint16_t>(sign | (abs >> 13));
  }

  static float to_float(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t out;
    if (exp == 0x1f) {
      out = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
      if (mant == 0) {
        out = sign;
      } else {  // subnormal: value = mant * 2^-24
        float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
        return sign ? -v : v;
      }
    } else {
      out = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    return std::bit_cast<float>(out);
  }
};

// bfloat16: the upper half of a float32.
struct BFloat16 {
  uint16_t bits = 0;

  constexpr BFloat16() = default;
  BFloat16(float value) : bits(from_float(value)) {}  // NOLINT
  operator float() const { return to_float(bits); }   // NOLINT

  static constexpr BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }

  static uint16_t from_float(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
      return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
    }
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
    return static_cast<uint16_t>((x + rounding) >> 16);
  }

  static float to_float(uint16_t b) {
    return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
  }
};

}  // namespace thd
