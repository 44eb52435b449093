// Element types of thd tensors, and the rules that combine them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>
#include <type_traits>

#include <thd/half.h>

namespace thd {

enum class DType : uint8_t {
  Bool,
  UInt8,
  Int8,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
};

inline constexpr int kNumDTypes = 9;

inline constexpr DType kBool = DType::Bool;
inline constexpr DType kUInt8 = DType::UInt8;
inline constexpr DType kInt8 = DType::Int8;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
// THD / torch names.
inline constexpr DType kByte = DType::UInt8;
inline constexpr DType kChar = DType::Int8;
inline constexpr DType kInt = DType::Int32;
inline constexpr DType kLong = DType::Int64;
inline constexpr DType kHalf = DType::Float16;
inline constexpr DType kFloat = DType::Float32;
inline constexpr DType kDouble = DType::Float64;

// "float32", "int64", ...
std::string_view dtype_name(DType dtype);
std::ostream& operator<<(std::ostream& os, DType dtype);
size_t element_size(DType dtype);
bool is_floating_point(DType dtype);
// Integer types; bool counts only when include_bool.
bool is_integral(DType dtype, bool include_bool = false);
// The dtype both operands are computed in, as torch.promote_types: bool < integers <
// floating; among integers and among floats the wider wins; uint8 with int8 gives
// int16's stand-in int32 (thd has no int16); float16 with bfloat16 gives float32.
DType promote_types(DType a, DType b);
// torch.can_cast: may a result of dtype `from` be written into a tensor of `to`
// (in-place ops, copies into outputs)? Floating into integer or bool, and integer
// into bool, may not.
bool can_cast(DType from, DType to);

// The C++ type that stores each dtype, and back.
template <typename T>
struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::Int8; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <typename T>
inline constexpr DType dtype_of_v = dtype_of<std::remove_cv_t<T>>::value;

}  // namespace thd
