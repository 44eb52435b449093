// The CUDA halves of index_select, gather, scatter and masked_fill. indexing.cpp
// checks every argument (dtypes, shapes, devices, aliasing) and calls these for CUDA
// tensors; they launch on the current stream of the tensors' device.
#pragma once

#include <cstdint>
#include <optional>

#include <thd/tensor.h>

namespace thd::cuda {

// The first value of `index` (int32 or int64; row-major order of its shape) outside
// [0, bound), if any. Waits for the current stream: the caller throws the CPU's
// IndexError before anything is written.
std::optional<int64_t> find_bad_index(const Tensor& index, int64_t bound);

// out[p] = self[p with coordinate dim replaced by index[p]] for every position p of
// out's shape. index has out's shape (it may be a view with 0 strides, as
// index_select's), int32 or int64; self has out's number of dims and is no smaller
// than out in every dim but dim. Every index is checked as it is read: returns the
// first one outside [0, self.size(dim)) as find_bad_index would, in which case out
// holds garbage. Waits for the current stream to read that check.
std::optional<int64_t> gather_on_device(const Tensor& out, const Tensor& self, int64_t dim,
                                        const Tensor& index);

// self[p with coordinate dim replaced by index[p]] = src[p] for every position p of
// index's shape. index is int64 and in range (find_bad_index); index and src have
// self's number of dims; nothing aliases self. Where indices repeat within a line
// along dim the last one wins, as on the CPU. Asynchronous.
void scatter_on_device(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

// The same with one value for every element: `value_bits` holds the value in self's
// dtype, in its low element_size() bytes. Asynchronous.
void scatter_fill_on_device(const Tensor& self, int64_t dim, const Tensor& index,
                            uint64_t value_bits);

// self[p] = value where mask[p] (bool, broadcast to self's shape; not aliasing self) is
// true; value_bits as for scatter_fill_on_device. Asynchronous.
void masked_fill_on_device(const Tensor& self, const Tensor& mask, uint64_t value_bits);

}  // namespace thd::cuda
