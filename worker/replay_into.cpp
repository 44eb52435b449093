#include "worker/replay_into.h"

#include <optional>

#include "tensor/into.h"
#include "tensor/into_elementwise.h"
#include "tensor/into_indexing.h"
#include "tensor/into_join.h"
#include "tensor/into_linalg.h"
#include "tensor/into_random.h"
#include "tensor/into_reduce.h"
#include "tensor/into_softmax.h"
#include "tensor/into_sort.h"
#include "worker/graphs.h"

namespace thd::worker {

namespace {

using detail::IntoBinary;
using detail::IntoCompare;

Scalar scalar_of(const fb::Scalar* s) { return protocol::from_fb(s != nullptr ? *s : fb::Scalar()); }

std::optional<IntoBinary> arithmetic_of(fb::BinaryOp op) {
  switch (op) {
    case fb::BinaryOp::Add: return IntoBinary::Add;
    case fb::BinaryOp::Sub: return IntoBinary::Sub;
    case fb::BinaryOp::Mul: return IntoBinary::Mul;
    case fb::BinaryOp::Div: return IntoBinary::Div;
    case fb::BinaryOp::Maximum: return IntoBinary::Maximum;
    case fb::BinaryOp::Minimum: return IntoBinary::Minimum;
    default: return std::nullopt;
  }
}

std::optional<IntoCompare> comparison_of(fb::BinaryOp op) {
  switch (op) {
    case fb::BinaryOp::Eq: return IntoCompare::Eq;
    case fb::BinaryOp::Ne: return IntoCompare::Ne;
    case fb::BinaryOp::Lt: return IntoCompare::Lt;
    case fb::BinaryOp::Le: return IntoCompare::Le;
    case fb::BinaryOp::Gt: return IntoCompare::Gt;
    case fb::BinaryOp::Ge: return IntoCompare::Ge;
    default: return std::nullopt;
  }
}

// The command loop runs the next replays of the command itself when the whole graph
// is on the default stream: there the plan it ran is run again (worker/kept_plans.h).
void keep_plan(ExecContext& ctx, const std::array<uint64_t, 3>& ids, const detail::FlatBinary& plan) {
  const GraphRun* run = ctx.prepared().graph;
  if (ctx.stream() == 0 && run->graph->default_stream_only()) {
    run->graph->plans().keep(ctx.prepared().index, ctx.table(), ids, plan);
  }
}

// a op b into the kept result `out` (b a tensor or a number): on the flat path,
// keeping the plan for the command's next replays (ids: out, a, and b or 0 for a
// number); any other layout through the broadcasting path.
template <typename B>
bool arithmetic_into(ExecContext& ctx, const Tensor& out, detail::IntoBinary kind, const Tensor& a, const B& b,
                     const std::array<uint64_t, 3>& ids) {
  const std::optional<detail::FlatBinary> plan = detail::plan_binary_into(kind, out, a, b);
  if (!plan) return detail::broadcast_into(kind, out, a, b);
  plan->run();
  keep_plan(ctx, ids, *plan);
  return true;
}

// a op b into `out`, b a tensor or a number.
template <typename B>
bool binary_into(const Tensor& out, fb::BinaryOp op, const Tensor& a, const B& b) {
  if (op == fb::BinaryOp::Pow) return detail::pow_into(out, a, b);
  if (const auto kind = arithmetic_of(op)) {
    // The flat path first: the common case, with the fewest checks.
    return detail::binary_into(*kind, out, a, b) || detail::broadcast_into(*kind, out, a, b);
  }
  if (const auto kind = comparison_of(op)) return detail::compare_into(*kind, out, a, b);
  return false;
}

std::optional<detail::IntoReduce> reduction_of(fb::ReduceKind kind) {
  using detail::IntoReduce;
  switch (kind) {
    case fb::ReduceKind::Sum: return IntoReduce::Sum;
    case fb::ReduceKind::Mean: return IntoReduce::Mean;
    case fb::ReduceKind::Prod: return IntoReduce::Prod;
    case fb::ReduceKind::Max: return IntoReduce::Max;
    case fb::ReduceKind::Min: return IntoReduce::Min;
    case fb::ReduceKind::Any: return IntoReduce::Any;
    case fb::ReduceKind::All: return IntoReduce::All;
    case fb::ReduceKind::Argmax: return IntoReduce::Argmax;
    case fb::ReduceKind::Argmin: return IntoReduce::Argmin;
    case fb::ReduceKind::Norm: return IntoReduce::Norm;
    case fb::ReduceKind::Var: return IntoReduce::Var;
    case fb::ReduceKind::Std: return IntoReduce::Std;
  }
  return std::nullopt;
}

}  // namespace

bool write_kept(ExecContext& ctx, const fb::Binary& op, const Tensor& a, const Tensor& b) {
  const Tensor* kept = ctx.reusable(op.out());
  if (kept == nullptr) return false;
  const auto kind = arithmetic_of(op.op());
  if (!kind) return binary_into(*kept, op.op(), a, b);
  return arithmetic_into(ctx, *kept, *kind, a, b, {op.out(), op.a(), op.b()});
}

bool write_kept(ExecContext& ctx, const fb::BinaryScalar& op, const Tensor& a) {
  if (op.reverse()) return false;
  const Tensor* kept = ctx.reusable(op.out());
  if (kept == nullptr) return false;
  const Scalar b = scalar_of(op.b());
  const auto kind = arithmetic_of(op.op());
  if (!kind) return binary_into(*kept, op.op(), a, b);
  return arithmetic_into(ctx, *kept, *kind, a, b, {op.out(), op.a(), 0});
}

bool write_kept(ExecContext& ctx, const fb::Clamp& op, const Tensor& a) {
  const Tensor* kept = ctx.reusable(op.out());
  if (kept == nullptr) return false;
  const std::optional<Scalar> lo = op.has_min() ? std::optional(scalar_of(op.min())) : std::nullopt;
  const std::optional<Scalar> hi = op.has_max() ? std::optional(scalar_of(op.max())) : std::nullopt;
  return detail::clamp_into(*kept, a, lo, hi);
}

bool write_kept(ExecContext& ctx, const fb::Where& op, const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Tensor* kept = ctx.reusable(op.out());
  return kept != nullptr && detail::where_into(*kept, cond, a, b);
}

bool write_kept(ExecContext& ctx, const fb::MaskedFill& op, const Tensor& a, const Tensor& mask) {
  const Tensor* kept = ctx.reusable(op.out());
  return kept != nullptr && detail::masked_fill_into(*kept, a, mask, scalar_of(op.value()));
}

bool write_kept(ExecContext& ctx, const fb::Matmul& op, const Tensor& a, const Tensor& b) {
  const Tensor* kept = ctx.reusable(op.out());
  if (kept == nullptr) return false;
  switch (op.kind()) {
    case fb::MatmulKind::Matmul: return detail::matmul_into(detail::IntoMatmul::Matmul, *kept, a, b);
    case fb::MatmulKind::Mm: return detail::matmul_into(detail::IntoMatmul::Mm, *kept, a, b);
    case fb::MatmulKind::Bmm: return detail::matmul_into(detail::IntoMatmul::Bmm, *kept, a, b);
    case fb::MatmulKind::Dot: return detail::matmul_into(detail::IntoMatmul::Dot, *kept, a, b);
    case fb::MatmulKind::Outer: return detail::matmul_into(detail::IntoMatmul::Outer, *kept, a, b);
    default: return false;
  }
}

bool write_kept(ExecContext& ctx, const fb::IndexOp& op, const Tensor& a, const Tensor& index) {
  const Tensor* kept = ctx.reusable(op.out());
  if (kept == nullptr) return false;
  switch (op.kind()) {
    case fb::IndexKind::IndexSelect: return detail::index_into(detail::IntoIndex::IndexSelect, *kept, a, op.dim(), index);
    case fb::IndexKind::Gather: return detail::index_into(detail::IntoIndex::Gather, *kept, a, op.dim(), index);
    default: return false;
  }
}

bool write_kept(ExecContext& ctx, const fb::Join& op, const std::vector<Tensor>& inputs) {
  const Tensor* kept = ctx.reusable(op.out());
  if (kept == nullptr) return false;
  switch (op.kind()) {
    case fb::JoinKind::Cat: return detail::join_into(detail::IntoJoin::Cat, *kept, inputs, op.dim());
    case fb::JoinKind::Stack: return detail::join_into(detail::IntoJoin::Stack, *kept, inputs, op.dim());
    default: return false;
  }
}

bool write_kept(ExecContext& ctx, const fb::Addmm& op, const Tensor& self, const Tensor& mat1, const Tensor& mat2) {
  const Tensor* kept = ctx.reusable(op.out());
  return kept != nullptr &&
         detail::addmm_into(*kept, self, mat1, mat2, scalar_of(op.beta()), scalar_of(op.alpha()));
}

bool write_kept(ExecContext& ctx, const fb::Reduce& op, const Tensor& a) {
  const Tensor* kept = ctx.reusable(op.out());
  const auto kind = reduction_of(op.kind());
  if (kept == nullptr || !kind) return false;
  detail::ReduceArgs args;
  args.all_dims = op.all_dims();
  args.dims = protocol::scalars_of(op.dims());
  args.keepdim = op.keepdim();
  args.p = op.p();
  args.correction = op.correction();
  return detail::reduce_into(*kind, *kept, a, args);
}

bool write_kept(ExecContext& ctx, const fb::Softmax& op, const Tensor& a) {
  const Tensor* kept = ctx.reusable(op.out());
  return kept != nullptr && detail::softmax_into(*kept, a, op.dim(), op.log());
}

bool write_kept(ExecContext& ctx, const fb::Sort& op, const Tensor& a) {
  const Tensor* values = ctx.reusable(op.values());
  const Tensor* indices = ctx.reusable(op.indices());
  if (values == nullptr || indices == nullptr) return false;
  return op.k() < 0 ? detail::sort_into(*values, *indices, a, op.dim(), op.descending())
                    : detail::topk_into(*values, *indices, a, op.k(), op.dim(), op.descending(), op.sorted());
}

bool write_kept(ExecContext& ctx, const fb::Create& op) {
  switch (op.kind()) {
    case fb::CreateKind::Rand:
    case fb::CreateKind::Randn:
    case fb::CreateKind::Randint: break;
    default: return false;
  }
  const Tensor* kept = ctx.reusable(op.out());
  if (kept == nullptr || !protocol::from_fb(op.device()).is_cpu()) return false;
  const Shape shape = protocol::shape_from_fb(op.shape(), "create");
  const DType dtype = protocol::from_fb(op.dtype());
  switch (op.kind()) {
    case fb::CreateKind::Rand: return detail::rand_into(*kept, shape, dtype, &ctx.generator());
    case fb::CreateKind::Randn: return detail::randn_into(*kept, shape, dtype, &ctx.generator());
    default:
      return detail::randint_into(*kept, scalar_of(op.start()).to_int64(), scalar_of(op.end()).to_int64(), shape,
                                  dtype, &ctx.generator());
  }
}

const Tensor* kept_landing(ExecContext& ctx, uint64_t id, const Shape& shape, DType dtype,
                           std::initializer_list<const Tensor*> inputs) {
  const Tensor* kept = ctx.reusable(id);
  if (kept == nullptr || !detail::writable_result(*kept, shape, dtype, Device::cpu(), inputs)) return nullptr;
  return kept;
}

}  // namespace thd::worker
