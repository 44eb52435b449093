#include "tensors.h"

#include <algorithm>
#include <cmath>

namespace thd::conformance {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash_of(uint64_t seed, int64_t i) { return mix(seed * 0x100000001b3ull + static_cast<uint64_t>(i)); }

int64_t uniform(uint64_t h, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(h % static_cast<uint64_t>(hi - lo + 1));
}

bool is_reduced_float(DType d) { return d == kFloat16 || d == kBFloat16; }

// Element i of an integer-valued dtype's full range (bool: 0/1).
int64_t full_range_int(DType dtype, uint64_t h) {
  switch (dtype) {
    case DType::Bool: return static_cast<int64_t>(h & 1);
    case DType::UInt8: return static_cast<int64_t>(h & 0xff);
    case DType::Int8: return static_cast<int8_t>(h & 0xff);
    case DType::Int32: return static_cast<int32_t>(h & 0xffffffffu);
    default: return static_cast<int64_t>(h);
  }
}

Tensor from_ints(const std::vector<int64_t>& v, DType dtype) { return Tensor::from_vector(v).to(dtype); }
Tensor from_doubles(const std::vector<double>& v, DType dtype) { return Tensor::from_vector(v).to(dtype); }

// An integer operand of op, small enough that no sum or product over 5 ranks
// leaves the dtype's exact range.
int64_t int_operand(ReduceOp op, DType dtype, uint64_t h) {
  switch (op) {
    case ReduceOp::Sum:
      switch (dtype) {
        case DType::UInt8: return uniform(h, 0, 40);
        case DType::Int8: return uniform(h, -20, 20);
        case DType::Int32: return uniform(h, -1000000, 1000000);
        default: return uniform(h, -1000000000000, 1000000000000);
      }
    case ReduceOp::Prod: {
      // At most 3^5 = 243 or 2^5 = 32 in magnitude over 5 ranks.
      if (dtype == DType::UInt8) return uniform(h, 1, 3);
      static constexpr int64_t kFactors[] = {1, 2, -1, -2, 3};
      return kFactors[h % (dtype == DType::Int8 ? 4 : 5)];
    }
    default: return full_range_int(dtype, h);
  }
}

double float_operand(ReduceOp op, DType dtype, uint64_t h, int rank, int world_size) {
  switch (op) {
    case ReduceOp::Sum:
      // Quarters are exact in float32/64; 16-bit floats get small integers, whose
      // partial sums stay exact below 256.
      return is_reduced_float(dtype) ? static_cast<double>(uniform(h, -20, 20))
                                     : static_cast<double>(uniform(h, -4000, 4000)) / 4.0;
    case ReduceOp::Prod: {
      static constexpr double kFactors[] = {1.0, 2.0, -1.0, -2.0, 0.5, -0.5};
      return kFactors[h % 6];
    }
    case ReduceOp::Avg:
      // base + 2r - (n - 1) over r = 0..n-1 sums to n * base: the average is exact.
      return static_cast<double>(uniform(h, -20, 20) + 2 * rank - (world_size - 1));
    default:
      return is_reduced_float(dtype) ? static_cast<double>(uniform(h, -100, 100))
                                     : static_cast<double>(uniform(h, -40000, 40000)) / 4.0;
  }
}

int64_t combine_ints(ReduceOp op, int64_t a, int64_t b) {
  switch (op) {
    case ReduceOp::Sum: return a + b;
    case ReduceOp::Prod: return a * b;
    case ReduceOp::Min: return std::min(a, b);
    case ReduceOp::Max: return std::max(a, b);
    case ReduceOp::BAnd: return a & b;
    case ReduceOp::BOr: return a | b;
    case ReduceOp::BXor: return a ^ b;
    case ReduceOp::Avg: break;
  }
  return 0;
}

double combine_floats(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return a + b;
    case ReduceOp::Prod: return a * b;
    case ReduceOp::Min: return std::min(a, b);
    case ReduceOp::Max: return std::max(a, b);
    default: break;
  }
  return 0;
}

}  // namespace

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> dtypes = {kFloat32, kFloat64, kInt64,    kInt32, kUInt8,
                                            kInt8,    kBool,    kFloat16, kBFloat16};
  return dtypes;
}

int64_t large_numel(DType dtype) { return static_cast<int64_t>((1u << 20) / element_size(dtype)) + 3; }

uint64_t seed_of(int rank, uint64_t salt) { return mix(static_cast<uint64_t>(rank) * 1000003u + salt * 7919u + 17u); }

Tensor pattern(DType dtype, int64_t numel, uint64_t seed) {
  if (is_floating_point(dtype)) {
    std::vector<double> v(static_cast<size_t>(numel));
    for (int64_t i = 0; i < numel; ++i) {
      v[static_cast<size_t>(i)] = static_cast<double>(uniform(hash_of(seed, i), -20000, 20000)) / 64.0;
    }
    return from_doubles(v, dtype);
  }
  std::vector<int64_t> v(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) v[static_cast<size_t>(i)] = full_range_int(dtype, hash_of(seed, i));
  return from_ints(v, dtype);
}

Tensor sentinel(DType dtype, const Shape& shape) {
  return Tensor::full(shape, dtype == kBool ? Scalar(true) : Scalar(77), dtype);
}

bool reduce_applies(ReduceOp op, DType dtype) {
  const bool floating = is_floating_point(dtype);
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Prod: return dtype != kBool;
    case ReduceOp::Min:
    case ReduceOp::Max: return true;
    case ReduceOp::Avg: return floating;
    case ReduceOp::BAnd:
    case ReduceOp::BOr:
    case ReduceOp::BXor: return !floating;
  }
  return false;
}

const std::vector<ReduceOp>& all_reduce_ops() {
  static const std::vector<ReduceOp> ops = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min,  ReduceOp::Max,
                                            ReduceOp::Avg, ReduceOp::BAnd, ReduceOp::BOr, ReduceOp::BXor};
  return ops;
}

Tensor reduce_operand(ReduceOp op, DType dtype, int rank, int world_size, int64_t numel, uint64_t salt) {
  const uint64_t seed = seed_of(rank, salt);
  if (is_floating_point(dtype)) {
    std::vector<double> v(static_cast<size_t>(numel));
    for (int64_t i = 0; i < numel; ++i) {
      // Avg's base must be the same on every rank: hash the element, not the rank.
      const uint64_t h = op == ReduceOp::Avg ? hash_of(salt, i) : hash_of(seed, i);
      v[static_cast<size_t>(i)] = float_operand(op, dtype, h, rank, world_size);
    }
    return from_doubles(v, dtype);
  }
  std::vector<int64_t> v(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) v[static_cast<size_t>(i)] = int_operand(op, dtype, hash_of(seed, i));
  return from_ints(v, dtype);
}

Tensor reduce_reference(ReduceOp op, DType dtype, int world_size, int64_t numel, uint64_t salt) {
  if (is_floating_point(dtype)) {
    std::vector<double> acc = reduce_operand(op, dtype, 0, world_size, numel, salt).to_vector<double>();
    for (int r = 1; r < world_size; ++r) {
      const auto v = reduce_operand(op, dtype, r, world_size, numel, salt).to_vector<double>();
      for (size_t i = 0; i < acc.size(); ++i) acc[i] = combine_floats(op, acc[i], v[i]);
    }
    if (op == ReduceOp::Avg) {
      for (double& x : acc) x /= world_size;
    }
    return from_doubles(acc, dtype);
  }
  std::vector<int64_t> acc = reduce_operand(op, dtype, 0, world_size, numel, salt).to_vector<int64_t>();
  for (int r = 1; r < world_size; ++r) {
    const auto v = reduce_operand(op, dtype, r, world_size, numel, salt).to_vector<int64_t>();
    for (size_t i = 0; i < acc.size(); ++i) acc[i] = combine_ints(op, acc[i], v[i]);
  }
  return from_ints(acc, dtype);
}

std::string label(const std::string& op, DType dtype, int64_t numel, int world_size) {
  return op + " " + std::string(dtype_name(dtype)) + " x" + std::to_string(numel) + " ws" +
         std::to_string(world_size);
}

}  // namespace thd::conformance
