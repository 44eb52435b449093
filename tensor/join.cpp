// cat and stack: every input is copied into its slot of the output with copy_,
// which already converts dtypes and walks any strides, on the CPU or on a CUDA device
// alike (all inputs must share one device).
#include <algorithm>
#include <utility>
#include <vector>

#include "tensor/check.h"
#include "tensor/into_elementwise.h"
#include "tensor/into_join.h"
#include "tensor/op_util.h"
#include "tensor/parallel.h"
#include "tensor/shape_util.h"

namespace thd {

using namespace detail;

namespace {

// torch's legacy rule: a 1-D empty tensor joins anything, whatever its shape.
bool skipped_by_cat(const Tensor& t) { return t.dim() == 1 && t.numel() == 0; }

// The checks shared by cat and stack; returns the promoted dtype of all inputs.
DType check_inputs(const std::vector<Tensor>& tensors, const char* op) {
  THD_CHECK(!tensors.empty(), ValueError, op, "expected a non-empty list of tensors");
  DType dtype = DType::Bool;
  for (size_t i = 0; i < tensors.size(); ++i) {
    THD_CHECK(tensors[i].defined(), ValueError, op, "tensor {} of the list is undefined", i);
    if (tensors[i].is_meta()) [[unlikely]] throw_meta(tensors[i], op, "a tensor of the list");
    check_same_device(op, {&tensors[0], &tensors[i]});
    dtype = i == 0 ? tensors[i].dtype() : promote_types(dtype, tensors[i].dtype());
  }
  return dtype;
}

// Copies srcs[i] into dsts[i]. Each copy_ is parallel on its own; when the pieces are
// small, one copy_ per piece would stay single-threaded, so spread pieces over threads.
// On a CUDA device every copy_ is an asynchronous launch on this thread's current
// stream, so they stay on this thread, in order.
void copy_pieces(std::vector<Tensor>& dsts, const std::vector<const Tensor*>& srcs) {
  if (!dsts.empty() && !dsts[0].device().is_cpu()) {
    for (size_t i = 0; i < dsts.size(); ++i) dsts[i].copy_(*srcs[i]);
    return;
  }
  int64_t total = 0;
  for (const Tensor& d : dsts) total += d.numel();
  const auto pieces = static_cast<int64_t>(dsts.size());
  if (pieces == 0) return;
  const int64_t avg = std::max<int64_t>(1, total / pieces);
  if (total < kGrainSize || avg >= kGrainSize) {
    for (int64_t i = 0; i < pieces; ++i) dsts[i].copy_(*srcs[i]);
    return;
  }
  parallel_for(0, pieces, std::max<int64_t>(1, kGrainSize / avg), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dsts[i].copy_(*srcs[i]);
  });
}

// Whether *into can be the result of shape and dtype on the inputs' device: CPU only
// (the join's copies on a device are not written there in place).
bool takes_result(const Tensor& into, const Shape& shape, DType dtype, const std::vector<Tensor>& tensors) {
  if (!tensors[0].device().is_cpu() || !writable_result(into, shape, dtype, Device::cpu(), {})) return false;
  return std::none_of(tensors.begin(), tensors.end(), [&](const Tensor& t) { return t.shares_storage(into); });
}

// cat and stack into a new tensor, or into *into (tensor/into_join.h) when that can be
// the result: an undefined tensor, with nothing written, when it cannot.
Tensor cat_impl(const std::vector<Tensor>& tensors, int64_t dim_in, const Tensor* into) {
  const DType dtype = check_inputs(tensors, "cat");
  size_t ref = tensors.size();  // the first tensor that takes part
  for (size_t i = 0; i < tensors.size(); ++i) {
    THD_CHECK(tensors[i].dim() > 0, ShapeError, "cat",
              "zero-dimensional tensor (at position {}) cannot be concatenated", i);
    if (ref == tensors.size() && !skipped_by_cat(tensors[i])) ref = i;
  }
  if (ref == tensors.size()) {  // only 1-D empty tensors
    wrap_dim(dim_in, 1, "cat");
    return into != nullptr ? Tensor() : Tensor::empty({0}, dtype, tensors[0].device());
  }
  const Tensor& first = tensors[ref];
  const int64_t dim = wrap_dim(dim_in, first.dim(), "cat");
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skipped_by_cat(t)) continue;
    THD_CHECK(t.dim() == first.dim(), ShapeError, "cat",
              "tensors must have the same number of dimensions: tensor {} has shape {} but "
              "tensor {} has shape {}",
              ref, shape_str(first.shape()), i, shape_str(t.shape()));
    for (int64_t d = 0; d < t.dim(); ++d) {
      THD_CHECK(d == dim || t.size(d) == first.size(d), ShapeError, "cat",
                "sizes of tensors must match except in dimension {}: expected size {} but "
                "got size {} for tensor number {} in the list (shape {}, while tensor {} "
                "has shape {})",
                dim, first.size(d), t.size(d), i, shape_str(t.shape()), ref,
                shape_str(first.shape()));
    }
    total += t.size(dim);
  }
  Shape shape = first.shape();
  shape[dim] = total;
  if (into != nullptr && !takes_result(*into, shape, dtype, tensors)) return Tensor();
  Tensor out = into != nullptr ? *into : Tensor::empty(shape, dtype, first.device());
  std::vector<Tensor> dsts;
  std::vector<const Tensor*> srcs;
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (skipped_by_cat(t) || t.size(dim) == 0) continue;
    dsts.push_back(out.narrow(dim, offset, t.size(dim)));
    srcs.push_back(&t);
    offset += t.size(dim);
  }
  copy_pieces(dsts, srcs);
  return out;
}

Tensor stack_impl(const std::vector<Tensor>& tensors, int64_t dim_in, const Tensor* into) {
  const DType dtype = check_inputs(tensors, "stack");
  const Tensor& first = tensors[0];
  for (size_t i = 1; i < tensors.size(); ++i) {
    THD_CHECK(tensors[i].shape() == first.shape(), ShapeError, "stack",
              "stack expects each tensor to be equal size, but got {} at entry 0 and {} at "
              "entry {}",
              shape_str(first.shape()), shape_str(tensors[i].shape()), i);
  }
  const int64_t dim = wrap_dim(dim_in, first.dim() + 1, "stack");
  Shape shape = first.shape();
  shape.insert(shape.begin() + dim, static_cast<int64_t>(tensors.size()));
  if (into != nullptr && !takes_result(*into, shape, dtype, tensors)) return Tensor();
  Tensor out = into != nullptr ? *into : Tensor::empty(shape, dtype, first.device());
  if (out.numel() == 0) return out;
  std::vector<Tensor> dsts;
  std::vector<const Tensor*> srcs;
  for (size_t i = 0; i < tensors.size(); ++i) {
    dsts.push_back(out.select(dim, static_cast<int64_t>(i)));
    srcs.push_back(&tensors[i]);
  }
  copy_pieces(dsts, srcs);
  return out;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) { return cat_impl(tensors, dim, nullptr); }
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) { return stack_impl(tensors, dim, nullptr); }

namespace detail {

bool join_into(IntoJoin kind, const Tensor& out, const std::vector<Tensor>& tensors, int64_t dim) {
  if (!out.defined()) return false;
  switch (kind) {
    case IntoJoin::Cat: return cat_impl(tensors, dim, &out).defined();
    case IntoJoin::Stack: return stack_impl(tensors, dim, &out).defined();
  }
  return false;
}

}  // namespace detail

}  // namespace thd
