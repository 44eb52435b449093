// What an op would make, from sizes a master sent: element counts that saturate at
// UINT64_MAX instead of overflowing, so an absurd shape is refused by the session's
// limit (Session::reserve) before anything is allocated, never wrapped into a small
// number that passes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>

#include <thd/tensor.h>

namespace thd::worker {

uint64_t saturating_mul(uint64_t a, uint64_t b);
uint64_t saturating_add(uint64_t a, uint64_t b);

// Elements of a tensor of `shape`; negative sizes count as 0 (the op refuses them).
uint64_t numel_of(std::span<const int64_t> shape);
// Elements of the broadcast of `shapes` (aligned from the last dim, each dim the
// largest size among them), as if they were compatible: an upper bound when not.
uint64_t broadcast_numel(std::initializer_list<std::span<const int64_t>> shapes);
// Elements of a matmul's output and of its operands broadcast to its batch (torch's
// matmul rules for 1-d and batched operands): an upper bound of what it allocates.
uint64_t matmul_numel(const Shape& a, const Shape& b);
// Elements of a.index_select(dim, index) with `index_numel` indices; 0 for a dim out
// of range (the op refuses it).
uint64_t index_select_numel(const Shape& a, int64_t dim, uint64_t index_numel);

// Elements of a reduction's output over `dims` of a tensor of `shape` (every dim when
// all_dims or dims is empty); the whole input's count for a dim out of range (the op
// refuses it), so the estimate never falls short.
uint64_t reduced_numel(const Shape& shape, std::span<const int64_t> dims, bool all_dims);

inline uint64_t bytes_of(uint64_t numel, DType dtype) { return saturating_mul(numel, element_size(dtype)); }

}  // namespace thd::worker
