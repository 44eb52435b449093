// A graph's replay writing an op's result into the storage the previous replay's
// result holds (docs/graphs.md, "Memory"), for the ops the tensor library can write
// into an existing tensor (tensor/into*.h): broadcasting elementwise ops, pow,
// comparisons, clamp, where, masked_fill, matrix, dot and outer products,
// index_select and gather, cat and stack, reductions, softmax, sort and topk, and
// the random creations. Each returns true when it wrote the kept result, and false
// when the op is to make a new tensor as usual: outside a replay, when the kept
// tensor cannot be written (ExecContext::reusable), or when it is not the op's
// result (another shape, dtype or device, storage shared with an input).
#pragma once

#include <initializer_list>
#include <vector>

#include "worker/ops.h"

namespace thd::worker {

bool write_kept(ExecContext& ctx, const fb::Binary& op, const Tensor& a, const Tensor& b);
bool write_kept(ExecContext& ctx, const fb::BinaryScalar& op, const Tensor& a);
bool write_kept(ExecContext& ctx, const fb::Clamp& op, const Tensor& a);
bool write_kept(ExecContext& ctx, const fb::Where& op, const Tensor& cond, const Tensor& a, const Tensor& b);
bool write_kept(ExecContext& ctx, const fb::MaskedFill& op, const Tensor& a, const Tensor& mask);
bool write_kept(ExecContext& ctx, const fb::Matmul& op, const Tensor& a, const Tensor& b);
bool write_kept(ExecContext& ctx, const fb::IndexOp& op, const Tensor& a, const Tensor& index);
bool write_kept(ExecContext& ctx, const fb::Join& op, const std::vector<Tensor>& inputs);
bool write_kept(ExecContext& ctx, const fb::Addmm& op, const Tensor& self, const Tensor& mat1, const Tensor& mat2);
bool write_kept(ExecContext& ctx, const fb::Reduce& op, const Tensor& a);
bool write_kept(ExecContext& ctx, const fb::Softmax& op, const Tensor& a);
// sort and topk: both results (values and indices) or neither.
bool write_kept(ExecContext& ctx, const fb::Sort& op, const Tensor& a);
// rand, randn and randint: drawn from the stream's generator as a new tensor's would be.
bool write_kept(ExecContext& ctx, const fb::Create& op);

// For an op whose bytes arrive from elsewhere (a worker-to-worker copy, a
// collective's output): the kept tensor `id` when they can land in it in place of
// a new CPU tensor of `shape` and `dtype` (contiguous, sharing no storage with
// `inputs`); null when the op is to make a new tensor.
const Tensor* kept_landing(ExecContext& ctx, uint64_t id, const Shape& shape, DType dtype,
                           std::initializer_list<const Tensor*> inputs = {});

}  // namespace thd::worker
