// The CUDA half of sort and topk (sort.cpp checks the arguments and makes the
// outputs, then calls this for CUDA tensors).
#pragma once

#include <cstdint>

#include <thd/tensor.h>

namespace thd::cuda {

// values and indices (int64) have self's shape but for k = values.size(dim) along dim,
// any strides, on self's device; self has at least one dim and one element. Each gets
// the first k elements of a stable sort of every line of self along dim, in the CPU's
// order: NaN above every other value, -0 equal to +0, equal values in input order (in
// both directions). Asynchronous on the current stream.
void sort_on_device(const Tensor& self, int64_t dim, bool descending, const Tensor& values,
                    const Tensor& indices);

}  // namespace thd::cuda
