// Shape and dtype inference on the master, so a bad call throws at the line that
// made it. Dtype rules (promotion, which dtypes an op accepts) are taken from the
// tensor library itself by running the op on one-element probes of the operands'
// dtypes and ranks; shapes follow torch's rules (broadcasting, reductions, matmul,
// joins); views are computed exactly by the tensor library on the metadata mirror.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include <thd/tensor.h>

#include "master/handle.h"
#include "protocol/codec.h"

namespace thd::master {

// A tiny real tensor standing in for `meta` in a dtype probe: same dtype, same
// number of dims (every size 1), so rank errors and promotion between 0-dim and
// dimensioned tensors match the real op.
Tensor probe_of(const Tensor& meta);
// Runs `op` on probes (rethrowing its error under `name`) and returns its dtype.
DType probe_dtype(const std::function<Tensor()>& op);
// The dtype remembered under `key` on this thread, if any; remember_dtype records one.
std::optional<DType> cached_dtype(uint64_t key);
void remember_dtype(uint64_t key, DType dtype);
// As probe_dtype, remembered under `key` (which must encode everything the result
// depends on: the op, the dtypes, the ranks that matter, scalar kinds). Failing
// probes are not remembered, so their error is raised again on every bad call.
template <typename Probe>
DType cached_probe_dtype(uint64_t key, Probe&& probe) {
  if (const auto d = cached_dtype(key)) return *d;
  const DType d = probe().dtype();
  remember_dtype(key, d);
  return d;
}

// The result of an elementwise op of the op table (protocol/op_table.h) on the
// mirrors `a` (and `b`): a mirror of the result's shape (broadcast for two
// tensors) and of the dtype the op's own call gives on probes (cached). Throws
// what the worker's call would, naming the op.
Tensor infer(protocol::fb::UnaryOp op, const Tensor& a);
Tensor infer(protocol::fb::BinaryOp op, const Tensor& a, const Tensor& b);
// `reverse`: b op a (2 - t).
Tensor infer(protocol::fb::BinaryOp op, const Tensor& a, const Scalar& b, bool reverse);
// The result of the same ops as infer's, for the common case it answers from the
// operands' shapes and dtypes alone: the operands' shape (equal shapes for two
// tensors, of at most FreshMeta::kMaxInlineDims dims), and a dtype this thread has
// inferred before for the same op, dtypes and ranks. nullopt otherwise: infer
// then gives the result, or the error.
std::optional<FreshMeta> infer_fresh(protocol::fb::UnaryOp op, const Handle& a);
std::optional<FreshMeta> infer_fresh(protocol::fb::BinaryOp op, const Handle& a, const Handle& b);
std::optional<FreshMeta> infer_fresh(protocol::fb::BinaryOp op, const Handle& a, const Scalar& b, bool reverse);
// The checks of the in-place forms (self.op_(...)) on the mirrors: self is
// writable, keeps its shape and can hold the result's dtype.
void check_inplace(protocol::fb::UnaryOp op, const Tensor& self);
void check_inplace(protocol::fb::BinaryOp op, const Tensor& self, const Tensor& other);
void check_inplace(protocol::fb::BinaryOp op, const Tensor& self, const Scalar& other);

// Output shapes. Each throws the tensor library's error type naming `op`.
Shape broadcast_for(const char* op, const Shape& a, const Shape& b);
Shape reduced_shape(const char* op, const Shape& in, const Dims& dims, bool keepdim);
Shape matmul_shape(const char* op, const Shape& a, const Shape& b);
Shape cat_shape(const std::vector<Shape>& shapes, int64_t dim);
Shape stack_shape(const std::vector<Shape>& shapes, int64_t dim);
int64_t wrap_dim(const char* op, int64_t dim, int64_t rank);
// In-place ops cannot write an expanded tensor (elements sharing memory): the
// tensor library's own check, run on the mirror's metadata.
void check_writable(const char* op, const Tensor& meta);
// In-place ops keep self's shape: `other` must broadcast to it.
void check_broadcasts_to(const char* op, const Shape& other, const Shape& self);

}  // namespace thd::master
