// The 16-bit <-> float32 conversions of float32_accumulation.cpp (written to
// vectorize) give Half's and BFloat16's own conversions bit for bit: every 16-bit
// pattern widened, and floats narrowed across every exponent, around every
// threshold of the rounding, and at infinities and NaNs.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

#include <thd/half.h>

#include "datachannel/collectives/float32_accumulation.h"

namespace thd {
namespace {

std::vector<uint16_t> every_16bit_pattern() {
  std::vector<uint16_t> all(65536);
  for (uint32_t b = 0; b < all.size(); ++b) all[b] = static_cast<uint16_t>(b);
  return all;
}

// Float bit patterns: a stride across all of them, and every pattern within 4096
// of the places where narrowing changes its rule (subnormal, overflow, inf/NaN),
// of both signs.
std::vector<float> float_samples() {
  std::vector<uint32_t> bits;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4099) bits.push_back(static_cast<uint32_t>(b));
  for (uint32_t edge : {0x00000000u, 0x33000000u, 0x38800000u, 0x387fe000u, 0x477ff000u, 0x47800000u, 0x7f800000u,
                        0x7fc00000u, 0x7fffffffu}) {
    for (uint32_t d = 0; d < 4096; ++d) {
      for (uint32_t sign : {0u, 0x80000000u}) {
        bits.push_back(sign | ((edge + d) & 0x7fffffffu));
        bits.push_back(sign | ((edge - d) & 0x7fffffffu));
      }
    }
  }
  std::vector<float> out;
  out.reserve(bits.size());
  for (uint32_t b : bits) out.push_back(std::bit_cast<float>(b));
  return out;
}

template <typename T>
void check_widen_every_pattern(DType dtype) {
  const std::vector<uint16_t> in = every_16bit_pattern();
  std::vector<float> out(in.size());
  detail::widen_to_float32(in.data(), out.data(), in.size(), dtype);
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(T::to_float(in[i])))
        << dtype_name(dtype) << " pattern 0x" << std::hex << in[i];
  }
}

template <typename T>
void check_narrow_samples(DType dtype) {
  const std::vector<float> in = float_samples();
  std::vector<uint16_t> out(in.size());
  detail::narrow_from_float32(in.data(), out.data(), in.size(), dtype);
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(out[i], T::from_float(in[i])) << dtype_name(dtype) << " of float bits 0x" << std::hex
                                            << std::bit_cast<uint32_t>(in[i]);
  }
}

TEST(Float32Accumulation, WideningIsTheDtypesOwnForEveryPattern) {
  check_widen_every_pattern<Half>(kFloat16);
  check_widen_every_pattern<BFloat16>(kBFloat16);
}

TEST(Float32Accumulation, NarrowingIsTheDtypesOwnAcrossTheRange) {
  check_narrow_samples<Half>(kFloat16);
  check_narrow_samples<BFloat16>(kBFloat16);
}

TEST(Float32Accumulation, OnlySixteenBitSumsProductsAndAveragesWiden) {
  for (DType d : {kFloat16, kBFloat16}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Prod}) EXPECT_TRUE(detail::accumulates_in_float32(d, op));
    for (ReduceOp op : {ReduceOp::Min, ReduceOp::Max}) EXPECT_FALSE(detail::accumulates_in_float32(d, op));
  }
  EXPECT_FALSE(detail::accumulates_in_float32(kFloat32, ReduceOp::Sum));
  EXPECT_FALSE(detail::accumulates_in_float32(kFloat64, ReduceOp::Sum));
  EXPECT_EQ(detail::float32_accumulation_bytes(kFloat16, ReduceOp::Sum, 10, 3), 52u);
  EXPECT_EQ(detail::float32_accumulation_bytes(kFloat16, ReduceOp::Max, 10, 3), 0u);
}

}  // namespace
}  // namespace thd
