// Elementwise math, reductions and linear algebra: each maps a command onto the
// tensor library's op of the same name (the elementwise ones through the op table
// the master infers with, protocol/op_table.h).
#include <algorithm>
#include <optional>

#include "protocol/op_table.h"
#include "tensor/check.h"
#include "tensor/into.h"
#include "worker/ops.h"
#include "worker/replay_into.h"
#include "worker/sizes.h"

namespace thd::worker {

namespace {

Scalar scalar_of(const fb::Scalar* s) { return protocol::from_fb(s != nullptr ? *s : fb::Scalar()); }

Dims dims_of(const flatbuffers::Vector<int64_t>* dims) {
  return protocol::scalars_of(dims);
}

Tensor reduce(const fb::Reduce& op, const Tensor& a) {
  const bool all = op.all_dims();
  const Dims dims = dims_of(op.dims());
  const bool keep = op.keepdim();
  auto first_dim = [&] {
    if (dims.empty()) THD_THROW(protocol::ProtocolError, "reduce", "argmax/argmin over a dim needs the dim");
    return dims[0];
  };
  switch (op.kind()) {
    case fb::ReduceKind::Sum: return all ? a.sum() : a.sum(dims, keep);
    case fb::ReduceKind::Mean: return all ? a.mean() : a.mean(dims, keep);
    case fb::ReduceKind::Prod: return all ? a.prod() : a.prod(dims, keep);
    case fb::ReduceKind::Max: return all ? a.max() : a.max(dims, keep);
    case fb::ReduceKind::Min: return all ? a.min() : a.min(dims, keep);
    case fb::ReduceKind::Any: return all ? a.any() : a.any(dims, keep);
    case fb::ReduceKind::All: return all ? a.all() : a.all(dims, keep);
    case fb::ReduceKind::Argmax: return all ? a.argmax() : a.argmax(first_dim(), keep);
    case fb::ReduceKind::Argmin: return all ? a.argmin() : a.argmin(first_dim(), keep);
    case fb::ReduceKind::Norm: return all ? a.norm(op.p()) : a.norm(op.p(), dims, keep);
    case fb::ReduceKind::Var: return all ? a.var(Dims{}, op.correction()) : a.var(dims, op.correction(), keep);
    case fb::ReduceKind::Std: return all ? a.std(Dims{}, op.correction()) : a.std(dims, op.correction(), keep);
  }
  protocol::throw_unknown_kind("reduce", static_cast<int>(op.kind()));
}

// The tensor memory a reduction allocates: its output, and what it stages. On the
// CPU only argmax/argmin over every dim of a strided tensor stage (a flat copy);
// the partial results live outside tensor memory. On a GPU a strided input may be
// copied to the layout the kernels read, and partial results take a scratch
// tensor of at most one byte per input element (a split covers >= 16 elements of
// accumulators of <= 16 bytes).
uint64_t reduction_bytes(const fb::Reduce& op, const Tensor& a) {
  const Dims dims = dims_of(op.dims());
  const bool arg = op.kind() == fb::ReduceKind::Argmax || op.kind() == fb::ReduceKind::Argmin;
  const std::span<const int64_t> over = arg && !dims.empty() ? std::span(dims).first(1) : std::span(dims);
  const uint64_t out_numel = reduced_numel(a.shape(), over, op.all_dims());
  DType out_dtype = a.dtype();
  switch (op.kind()) {
    case fb::ReduceKind::Sum:
    case fb::ReduceKind::Prod:
      if (!is_floating_point(a.dtype())) out_dtype = kInt64;
      break;
    case fb::ReduceKind::Argmax:
    case fb::ReduceKind::Argmin: out_dtype = kInt64; break;
    case fb::ReduceKind::Any:
    case fb::ReduceKind::All: out_dtype = kBool; break;
    default: break;
  }
  uint64_t bytes = bytes_of(out_numel, out_dtype);
  const uint64_t input_copy = a.is_contiguous() ? 0 : bytes_of(numel_of(a.shape()), a.dtype());
  if (a.device().is_cpu()) {
    if (arg && (op.all_dims() || dims.empty())) bytes = saturating_add(bytes, input_copy);
  } else {
    bytes = saturating_add(bytes, saturating_add(input_copy, numel_of(a.shape())));
  }
  return bytes;
}

Tensor matmul(fb::MatmulKind kind, const Tensor& a, const Tensor& b) {
  switch (kind) {
    case fb::MatmulKind::Matmul: return a.matmul(b);
    case fb::MatmulKind::Mm: return a.mm(b);
    case fb::MatmulKind::Bmm: return a.bmm(b);
    case fb::MatmulKind::Dot: return a.dot(b);
    case fb::MatmulKind::Outer: return a.outer(b);
  }
  protocol::throw_unknown_kind("matmul", static_cast<int>(kind));
}

// The in-place target of an op whose out is 0: a live tensor the op writes.
Tensor& target(ExecContext& ctx, uint64_t id) { return const_cast<Tensor&>(ctx.input(id)); }

// Bytes of `numel` computed elements of `dtype`: math on integers computes in
// float32, so at least 4 bytes each.
uint64_t computed_bytes(uint64_t numel, DType dtype) {
  return saturating_mul(numel, std::max<size_t>(element_size(dtype), 4));
}

// The unary ops a graph's replay can write into the previous replay's result
// (tensor/into.h); nullopt for the others.
std::optional<detail::IntoUnary> into_of(fb::UnaryOp op) {
  switch (op) {
    case fb::UnaryOp::Neg: return detail::IntoUnary::Neg;
    case fb::UnaryOp::Abs: return detail::IntoUnary::Abs;
    case fb::UnaryOp::Exp: return detail::IntoUnary::Exp;
    case fb::UnaryOp::Log: return detail::IntoUnary::Log;
    case fb::UnaryOp::Sqrt: return detail::IntoUnary::Sqrt;
    case fb::UnaryOp::Rsqrt: return detail::IntoUnary::Rsqrt;
    case fb::UnaryOp::Sin: return detail::IntoUnary::Sin;
    case fb::UnaryOp::Cos: return detail::IntoUnary::Cos;
    case fb::UnaryOp::Tanh: return detail::IntoUnary::Tanh;
    case fb::UnaryOp::Sigmoid: return detail::IntoUnary::Sigmoid;
    case fb::UnaryOp::Relu: return detail::IntoUnary::Relu;
    case fb::UnaryOp::Gelu: return detail::IntoUnary::Gelu;
    default: return std::nullopt;
  }
}

// In a graph's replay: a copy of `a` (as `dtype`) written into the storage the
// previous replay's result holds, when it has the very shape, dtype and device;
// false when the op makes a new tensor instead.
bool copy_into(ExecContext& ctx, uint64_t out, const Tensor& a, DType dtype) {
  const Tensor* kept = ctx.reusable(out);
  if (kept == nullptr || kept->dtype() != dtype || kept->device() != a.device() || !kept->is_contiguous() ||
      kept->shape() != a.shape() || kept->shares_storage(a)) {
    return false;
  }
  const_cast<Tensor&>(*kept).copy_(a);
  return true;
}

}  // namespace

void run(ExecContext& ctx, const fb::Unary& op) {
  ctx.output(op.out(), op.a());
  if (op.out() == 0) return protocol::call_(op.op(), target(ctx, op.a()));
  const Tensor& a = ctx.input(op.a());
  if (op.op() == fb::UnaryOp::Clone || op.op() == fb::UnaryOp::Contiguous) {
    // A contiguous input's contiguous() is the input itself: that result shares
    // the input's storage, which the graph's handle then does not hold alone.
    if (copy_into(ctx, op.out(), a, a.dtype())) return;
  } else if (const Tensor* kept = ctx.reusable(op.out())) {
    const auto kind = into_of(op.op());
    if (kind.has_value() && detail::unary_into(*kind, *kept, a)) return;
  }
  ctx.reserve(computed_bytes(numel_of(a.shape()), a.dtype()));
  ctx.define(op.out(), protocol::call(op.op(), a));
}

void run(ExecContext& ctx, const fb::Binary& op) {
  ctx.output(op.out(), op.a());
  const Tensor& b = ctx.input(op.b());
  if (op.out() == 0) return protocol::call_(op.op(), target(ctx, op.a()), b);
  const Tensor& a = ctx.input(op.a());
  if (write_kept(ctx, op, a, b)) return;
  // Operands of one shape and dtype (most ops) need no broadcasting or promotion rules.
  const bool alike = a.dtype() == b.dtype() && a.shape() == b.shape();
  ctx.reserve(computed_bytes(alike ? numel_of(a.shape()) : broadcast_numel({a.shape(), b.shape()}),
                             alike ? a.dtype() : result_type(a, b)));
  ctx.define(op.out(), protocol::call(op.op(), a, b));
}

void run(ExecContext& ctx, const fb::BinaryScalar& op) {
  ctx.output(op.out(), op.a());
  const Scalar b = scalar_of(op.b());
  if (op.out() == 0) {
    if (op.reverse()) THD_THROW(protocol::ProtocolError, "binary", "a scalar-first op has no in-place form");
    return protocol::call_(op.op(), target(ctx, op.a()), b);
  }
  const Tensor& a = ctx.input(op.a());
  if (write_kept(ctx, op, a)) return;
  ctx.reserve(computed_bytes(numel_of(a.shape()), result_type(a, b)));
  ctx.define(op.out(), op.reverse() ? protocol::call_reversed(op.op(), b, a) : protocol::call(op.op(), a, b));
}

void run(ExecContext& ctx, const fb::Clamp& op) {
  ctx.output(op.out(), op.a());
  const std::optional<Scalar> lo = op.has_min() ? std::optional(scalar_of(op.min())) : std::nullopt;
  const std::optional<Scalar> hi = op.has_max() ? std::optional(scalar_of(op.max())) : std::nullopt;
  if (op.out() == 0) {
    target(ctx, op.a()).clamp_(lo, hi);
    return;
  }
  const Tensor& a = ctx.input(op.a());
  if (write_kept(ctx, op, a)) return;
  ctx.reserve(computed_bytes(numel_of(a.shape()), a.dtype()));
  ctx.define(op.out(), a.clamp(lo, hi));
}

void run(ExecContext& ctx, const fb::Fill& op) {
  ctx.target(op.target());
  target(ctx, op.target()).fill_(scalar_of(op.value()));
}

void run(ExecContext& ctx, const fb::CopyFrom& op) {
  ctx.target(op.target());
  const Tensor& src = ctx.input(op.src());
  Tensor& self = target(ctx, op.target());
  if (src.device() == self.device()) {
    self.copy_(src);
    return;
  }
  // Across devices (torch's copy_ allows it): the source moves to self's device first.
  ctx.reserve(src.nbytes(), self.device());
  self.copy_(src.to(self.device()));
}

void run(ExecContext& ctx, const fb::Cast& op) {
  ctx.fresh(op.out());
  // Always a copy: the master keeps `to()` without a copy on its side.
  const Tensor& a = ctx.input(op.a());
  const DType dtype = protocol::from_fb(op.dtype());
  if (copy_into(ctx, op.out(), a, dtype)) return;
  ctx.reserve(bytes_of(numel_of(a.shape()), dtype));
  ctx.define(op.out(), a.to(dtype, /*copy=*/true));
}

void run(ExecContext& ctx, const fb::ToDevice& op) {
  ctx.fresh(op.out());
  const Tensor& a = ctx.input(op.a());
  const Device device = protocol::from_fb(op.device());
  // Always a copy (the master keeps `to(device)` without a copy on its side); the
  // reserve refuses a device this node does not have, naming what it has.
  ctx.reserve(bytes_of(numel_of(a.shape()), a.dtype()), device);
  ctx.define(op.out(), a.to(device, /*copy=*/true));
}

void run(ExecContext& ctx, const fb::Reduce& op) {
  ctx.fresh(op.out());
  const Tensor& a = ctx.input(op.a());
  if (write_kept(ctx, op, a)) return;
  ctx.reserve(reduction_bytes(op, a));
  ctx.define(op.out(), reduce(op, a));
}

void run(ExecContext& ctx, const fb::Softmax& op) {
  ctx.fresh(op.out());
  const Tensor& a = ctx.input(op.a());
  if (write_kept(ctx, op, a)) return;
  ctx.reserve(saturating_mul(computed_bytes(numel_of(a.shape()), a.dtype()), 2));
  ctx.define(op.out(), op.log() ? a.log_softmax(op.dim()) : a.softmax(op.dim()));
}

void run(ExecContext& ctx, const fb::Matmul& op) {
  ctx.fresh(op.out());
  const Tensor& a = ctx.input(op.a());
  const Tensor& b = ctx.input(op.b());
  if (write_kept(ctx, op, a, b)) return;
  const uint64_t numel = op.kind() == fb::MatmulKind::Outer ? saturating_mul(numel_of(a.shape()), numel_of(b.shape()))
                                                            : matmul_numel(a.shape(), b.shape());
  ctx.reserve(computed_bytes(numel, result_type(a, b)));
  ctx.define(op.out(), matmul(op.kind(), a, b));
}

void run(ExecContext& ctx, const fb::Addmm& op) {
  ctx.fresh(op.out());
  const Tensor& self = ctx.input(op.self());
  const Tensor& mat1 = ctx.input(op.mat1());
  const Tensor& mat2 = ctx.input(op.mat2());
  if (write_kept(ctx, op, self, mat1, mat2)) return;
  ctx.reserve(computed_bytes(saturating_add(matmul_numel(mat1.shape(), mat2.shape()), numel_of(self.shape())),
                             result_type(mat1, mat2)));
  ctx.define(op.out(), self.addmm(mat1, mat2, scalar_of(op.beta()), scalar_of(op.alpha())));
}

}  // namespace thd::worker
