#include <thd/dtype.h>
#include <thd/scalar.h>

#include <algorithm>

#include "tensor/dispatch.h"

namespace thd {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "invalid dtype";
}

std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }

size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8: return 1;
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Int32:
    case DType::Float32: return 4;
    case DType::Int64:
    case DType::Float64: return 8;
  }
  throw TypeError("invalid dtype value " + std::to_string(static_cast<int>(dtype)));
}

bool is_floating_point(DType dtype) {
  return dtype == DType::Float16 || dtype == DType::BFloat16 || dtype == DType::Float32 ||
         dtype == DType::Float64;
}

bool is_integral(DType dtype, bool include_bool) {
  switch (dtype) {
    case DType::Bool: return include_bool;
    case DType::UInt8:
    case DType::Int8:
    case DType::Int32:
    case DType::Int64: return true;
    default: return false;
  }
}

namespace {
int width_rank(DType d) {
  switch (d) {
    case DType::Bool: return 0;
    case DType::UInt8:
    case DType::Int8:
    case DType::Float16:
    case DType::BFloat16: return 1;
    case DType::Int32:
    case DType::Float32: return 2;
    case DType::Int64:
    case DType::Float64: return 3;
  }
  return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  bool fa = is_floating_point(a), fb = is_floating_point(b);
  if (fa != fb) return fa ? a : b;
  if (fa) {
    // float16 and bfloat16 have no common 16-bit type.
    if (width_rank(a) == 1 && width_rank(b) == 1) return DType::Float32;
  } else if (width_rank(a) == 1 && width_rank(b) == 1) {
    return DType::Int32;  // uint8 with int8; torch gives int16, which thd lacks
  }
  return width_rank(a) >= width_rank(b) ? a : b;
}

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: return os << (s.to_bool() ? "true" : "false");
    case Scalar::Kind::Int: return os << s.to_int64();
    case Scalar::Kind::Float: return os << s.to_double();
  }
  return os;
}

namespace detail {

void throw_unsupported_dtype(const char* op, DType dtype, unsigned set) {
  std::string accepted;
  auto add = [&](const char* what) {
    if (!accepted.empty()) accepted += ", ";
    accepted += what;
  };
  if (set & kBoolSet) add("bool");
  if (set & kIntegerSet) add("integer");
  if (set & kFloatingSet) add("floating-point");
  THD_THROW(TypeError, op, "dtype {} is not supported (accepted: {} dtypes)", dtype, accepted);
}

void throw_dtype_mismatch(const char* op, DType expected, DType got) {
  THD_THROW(TypeError, op, "expected a tensor of dtype {}, got {}", expected, got);
}

}  // namespace detail

bool can_cast(DType from, DType to) {
  if (is_floating_point(from) && !is_floating_point(to)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

}  // namespace thd
