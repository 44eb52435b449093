// Views, indexing, joining, splitting and sorting.
#include "tensor/check.h"
#include "worker/ops.h"
#include "worker/replay_into.h"
#include "worker/sizes.h"

namespace thd::worker {

namespace {

Scalar scalar_of(const fb::Scalar* s) { return protocol::from_fb(s != nullptr ? *s : fb::Scalar()); }

std::vector<int64_t> longs(const flatbuffers::Vector<int64_t>* v) {
  return protocol::scalars_of(v);
}

Tensor view(const fb::ViewOp& op, const Tensor& a) {
  switch (op.kind()) {
    case fb::ViewKind::View: return a.view(longs(op.shape()));
    case fb::ViewKind::Reshape: return a.reshape(longs(op.shape()));
    case fb::ViewKind::Flatten: return a.flatten(op.dim0(), op.dim1());
    case fb::ViewKind::Transpose: return a.transpose(op.dim0(), op.dim1());
    case fb::ViewKind::Permute: return a.permute(longs(op.dims()));
    case fb::ViewKind::Slice: return a.slice(op.dim0(), op.start(), op.end(), op.step());
    case fb::ViewKind::Narrow: return a.narrow(op.dim0(), op.start(), op.end());
    case fb::ViewKind::Select: return a.select(op.dim0(), op.start());
    case fb::ViewKind::Expand: return a.expand(longs(op.shape()));
    case fb::ViewKind::Squeeze: return a.squeeze();
    case fb::ViewKind::SqueezeDim: return a.squeeze(op.dim0());
    case fb::ViewKind::Unsqueeze: return a.unsqueeze(op.dim0());
  }
  THD_THROW(protocol::ProtocolError, "view", "view kind {} is not in this protocol version",
            static_cast<int>(op.kind()));
}

Tensor& target(ExecContext& ctx, uint64_t id) { return const_cast<Tensor&>(ctx.input(id)); }

}  // namespace

void run(ExecContext& ctx, const fb::ViewOp& op) {
  ctx.fresh(op.out());
  const Tensor& a = ctx.input(op.a());
  // A reshape or flatten of a strided tensor copies it.
  if (op.kind() == fb::ViewKind::Reshape || op.kind() == fb::ViewKind::Flatten) {
    ctx.reserve(bytes_of(numel_of(a.shape()), a.dtype()));
  }
  Tensor v = view(op, a);
  ctx.check_view(v);  // expand: the only view larger than what it views
  ctx.define(op.out(), std::move(v));
}

void run(ExecContext& ctx, const fb::IndexOp& op) {
  ctx.fresh(op.out());
  const Tensor& a = ctx.input(op.a());
  const Tensor& index = ctx.input(op.index());
  if (write_kept(ctx, op, a, index)) return;
  switch (op.kind()) {
    case fb::IndexKind::IndexSelect:
      ctx.reserve(bytes_of(index_select_numel(a.shape(), op.dim(), numel_of(index.shape())), a.dtype()));
      return ctx.define(op.out(), a.index_select(op.dim(), index));
    case fb::IndexKind::Gather:
      ctx.reserve(bytes_of(numel_of(index.shape()), a.dtype()));
      return ctx.define(op.out(), a.gather(op.dim(), index));
  }
  THD_THROW(protocol::ProtocolError, "index", "index kind {} is not in this protocol version",
            static_cast<int>(op.kind()));
}

void run(ExecContext& ctx, const fb::Scatter& op) {
  ctx.output(op.out(), op.a());
  const Tensor& index = ctx.input(op.index());
  if (op.out() == 0) {
    Tensor& self = target(ctx, op.a());
    if (op.src() != 0) self.scatter_(op.dim(), index, ctx.input(op.src()));
    else self.scatter_(op.dim(), index, scalar_of(op.value()));
    return;
  }
  const Tensor& a = ctx.input(op.a());
  ctx.reserve(bytes_of(numel_of(a.shape()), a.dtype()));
  ctx.define(op.out(), op.src() != 0 ? a.scatter(op.dim(), index, ctx.input(op.src()))
                                     : a.scatter(op.dim(), index, scalar_of(op.value())));
}

void run(ExecContext& ctx, const fb::MaskedFill& op) {
  ctx.output(op.out(), op.a());
  const Tensor& mask = ctx.input(op.mask());
  if (op.out() == 0) {
    target(ctx, op.a()).masked_fill_(mask, scalar_of(op.value()));
    return;
  }
  const Tensor& a = ctx.input(op.a());
  if (write_kept(ctx, op, a, mask)) return;
  ctx.reserve(bytes_of(broadcast_numel({a.shape(), mask.shape()}), a.dtype()));
  ctx.define(op.out(), a.masked_fill(mask, scalar_of(op.value())));
}

void run(ExecContext& ctx, const fb::Where& op) {
  ctx.fresh(op.out());
  const Tensor& cond = ctx.input(op.cond());
  if (op.a() == 0 && op.b() == 0) {
    ctx.reserve(saturating_mul(numel_of(cond.shape()), 8));
    return ctx.define(op.out(), where(cond, scalar_of(op.sa()), scalar_of(op.sb())));
  }
  const Tensor& a = ctx.input(op.a());
  const Tensor& b = ctx.input(op.b());
  if (write_kept(ctx, op, cond, a, b)) return;
  ctx.reserve(bytes_of(broadcast_numel({cond.shape(), a.shape(), b.shape()}), result_type(a, b)));
  ctx.define(op.out(), where(cond, a, b));
}

void run(ExecContext& ctx, const fb::Join& op) {
  ctx.fresh(op.out());
  std::vector<Tensor> inputs;
  if (op.inputs() != nullptr) {
    inputs.reserve(op.inputs()->size());
    for (uint64_t id : protocol::scalars_of(op.inputs())) inputs.push_back(ctx.input(id));
  }
  if (write_kept(ctx, op, inputs)) return;
  uint64_t bytes = 0;
  for (const Tensor& t : inputs) bytes = saturating_add(bytes, saturating_mul(numel_of(t.shape()), 8));
  ctx.reserve(bytes);
  switch (op.kind()) {
    case fb::JoinKind::Cat: return ctx.define(op.out(), cat(inputs, op.dim()));
    case fb::JoinKind::Stack: return ctx.define(op.out(), stack(inputs, op.dim()));
  }
  THD_THROW(protocol::ProtocolError, "join", "join kind {} is not in this protocol version",
            static_cast<int>(op.kind()));
}

void run(ExecContext& ctx, const fb::Split& op) {
  const std::vector<int64_t> sizes = longs(op.sizes());
  const std::vector<uint64_t> outs = protocol::scalars_of(op.outs());
  const size_t n = outs.size();
  for (size_t i = 0; i < n; ++i) ctx.fresh(outs[i]);
  if (n != sizes.size()) {
    THD_THROW(protocol::ProtocolError, "split", "{} outputs for {} sizes", n, sizes.size());
  }
  std::vector<Tensor> parts = ctx.input(op.a()).split(sizes, op.dim());
  for (size_t i = 0; i < n; ++i) ctx.define(outs[i], std::move(parts[i]));
}

void run(ExecContext& ctx, const fb::Sort& op) {
  ctx.fresh(op.values());
  ctx.fresh(op.indices());
  const Tensor& a = ctx.input(op.a());
  if (write_kept(ctx, op, a)) return;
  ctx.reserve(saturating_mul(numel_of(a.shape()), a.element_size() + 8));  // values and int64 indices
  auto [values, indices] = op.k() < 0 ? a.sort(op.dim(), op.descending())
                                      : a.topk(op.k(), op.dim(), /*largest=*/op.descending(), op.sorted());
  ctx.define(op.values(), std::move(values));
  ctx.define(op.indices(), std::move(indices));
}

}  // namespace thd::worker
