// The results of the op table's elementwise ops (protocol/op_table.h) inferred on
// the master: shapes by torch's broadcasting, dtypes (and the tensor library's
// checks) by the op's own call on probes.
#include "master/infer.h"

#include "protocol/op_table.h"
#include "tensor/check.h"

namespace thd::master {

namespace fb = protocol::fb;

namespace {

// Keys of the dtype cache: the op family and code, the dtypes, and what of the
// operands' shapes and kinds promotion looks at. One family per kind of call: the
// same op code means another op in another family.
enum class Family : uint64_t { Binary = 1, BinaryInPlace, BinaryScalar, Unary, BinaryScalarInPlace };

uint64_t key(Family family, uint64_t op, DType a, DType b, uint64_t extra) {
  return static_cast<uint64_t>(family) << 56 | op << 48 | uint64_t{static_cast<uint8_t>(a)} << 40 |
         uint64_t{static_cast<uint8_t>(b)} << 32 | extra;
}

uint64_t code(auto op) { return static_cast<uint64_t>(op); }

DType unary_dtype(fb::UnaryOp op, const Tensor& a) {
  return cached_probe_dtype(key(Family::Unary, code(op), a.dtype(), a.dtype(), 0),
                            [&] { return protocol::call(op, probe_of(a)); });
}

// The fresh result of shape `shape` and a remembered `dtype`, unless its bytes
// would not fit in int64 (infer raises that).
std::optional<FreshMeta> fresh_of(std::span<const int64_t> shape, std::optional<DType> dtype) {
  if (!dtype || shape.size() > FreshMeta::kMaxInlineDims) return std::nullopt;
  FreshMeta m{.dtype = *dtype, .rank = static_cast<uint8_t>(shape.size()), .dims = {}};
  const auto es = static_cast<int64_t>(element_size(*dtype));
  int64_t bytes = es;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t d = shape[i];
    if (d == 0) bytes = 0;
    if (bytes != 0 && d > INT64_MAX / bytes) return std::nullopt;
    bytes *= d;
    m.dims[i] = d;
  }
  return m;
}

}  // namespace

std::optional<FreshMeta> infer_fresh(fb::UnaryOp op, const Handle& a) {
  return fresh_of(a.shape(), cached_dtype(key(Family::Unary, code(op), a.dtype(), a.dtype(), 0)));
}

std::optional<FreshMeta> infer_fresh(fb::BinaryOp op, const Handle& a, const Handle& b) {
  const auto shape = a.shape();
  const auto other = b.shape();
  if (!std::equal(shape.begin(), shape.end(), other.begin(), other.end())) return std::nullopt;
  const bool scalar = shape.empty();
  return fresh_of(shape, cached_dtype(key(Family::Binary, code(op), a.dtype(), b.dtype(), scalar << 1 | scalar)));
}

std::optional<FreshMeta> infer_fresh(fb::BinaryOp op, const Handle& a, const Scalar& b, bool reverse) {
  const auto shape = a.shape();
  return fresh_of(shape, cached_dtype(key(Family::BinaryScalar, code(op), a.dtype(), b.natural_dtype(),
                                          static_cast<uint64_t>(shape.empty()) << 1 | reverse)));
}

Tensor infer(fb::UnaryOp op, const Tensor& a) { return mirror(a.shape(), unary_dtype(op, a)); }

Tensor infer(fb::BinaryOp op, const Tensor& a, const Tensor& b) {
  Shape shape = broadcast_for(protocol::op_name(op), a.shape(), b.shape());
  const DType dtype =
      cached_probe_dtype(key(Family::Binary, code(op), a.dtype(), b.dtype(), (a.dim() == 0) << 1 | (b.dim() == 0)),
                         [&] { return protocol::call(op, probe_of(a), probe_of(b)); });
  return mirror(std::move(shape), dtype);
}

Tensor infer(fb::BinaryOp op, const Tensor& a, const Scalar& b, bool reverse) {
  const DType dtype = cached_probe_dtype(
      key(Family::BinaryScalar, code(op), a.dtype(), b.natural_dtype(), (a.dim() == 0) << 1 | reverse),
      [&] { return reverse ? protocol::call_reversed(op, b, probe_of(a)) : protocol::call(op, probe_of(a), b); });
  return mirror(a.shape(), dtype);
}

void check_inplace(fb::UnaryOp op, const Tensor& self) {
  const char* name = protocol::op_name(op);
  const DType dtype = unary_dtype(op, self);
  check_writable(name, self);
  if (!can_cast(dtype, self.dtype())) {
    THD_THROW(TypeError, name, "in-place: result dtype {} cannot be cast to self's dtype {}", dtype_name(dtype),
              dtype_name(self.dtype()));
  }
}

void check_inplace(fb::BinaryOp op, const Tensor& self, const Tensor& other) {
  const char* name = protocol::op_name(op);
  check_writable(name, self);
  check_broadcasts_to(name, other.shape(), self.shape());
  (void)cached_probe_dtype(key(Family::BinaryInPlace, code(op), self.dtype(), other.dtype(), other.dim() == 0), [&] {
    Tensor p = probe_of(self);
    protocol::call_(op, p, probe_of(other));
    return p;
  });
}

void check_inplace(fb::BinaryOp op, const Tensor& self, const Scalar& other) {
  check_writable(protocol::op_name(op), self);
  const auto probe = [&] {
    Tensor p = probe_of(self);
    protocol::call_(op, p, other);
    return p;
  };
  if (op == fb::BinaryOp::Pow) {
    // Not cached: an integer power's checks depend on the exponent's value.
    (void)probe();
  } else {
    // add_/sub_/mul_/div_ take the number as a value of the compute dtype: what
    // they accept depends on the dtypes alone (the natural dtype of the number).
    (void)cached_probe_dtype(key(Family::BinaryScalarInPlace, code(op), self.dtype(), other.natural_dtype(), 0),
                             probe);
  }
}

}  // namespace thd::master
