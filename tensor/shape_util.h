// Shape arithmetic shared by the tensor ops.
#pragma once

#include <cstdint>

#include <thd/tensor.h>

namespace thd::detail {

// Maps a possibly negative dim into [0, ndim); IndexError naming op otherwise.
// A 0-dim tensor accepts dims -1 and 0 as torch does when `scalar_ok`.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op, bool scalar_ok = false);
// broadcast_shapes whose error names `op`.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Sorted, wrapped, duplicate-free; empty means every dim.
Dims wrap_dims(const Dims& dims, int64_t ndim, const char* op);
// Row-major strides of a contiguous tensor of `shape`.
Shape contiguous_strides(const Shape& shape);
// Product of sizes; ValueError for negative sizes or when it overflows int64.
int64_t checked_numel(const Shape& shape, const char* op);
// Fills in a -1 dim of `shape` so it holds numel elements; ShapeError otherwise.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op);
// Throws ValueError naming op when t is undefined.
void check_defined(const Tensor& t, const char* op, const char* what = "input");
// check_defined, and NotImplementedError naming op when t is a meta tensor: the
// guard of every op that reads or writes elements, before it touches them.
void check_data(const Tensor& t, const char* op, const char* what = "input");
// The NotImplementedError check_data raises for a meta tensor.
[[noreturn]] void throw_meta(const Tensor& t, const char* op, const char* what);
// Throws ShapeError unless a and b have equal shapes.
void check_same_shape(const Tensor& a, const Tensor& b, const char* op);
// Strides for viewing a tensor of (shape, strides) as new_shape without a copy, or
// an empty optional when its memory layout does not allow it.
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides,
                                  const Shape& new_shape);

}  // namespace thd::detail
