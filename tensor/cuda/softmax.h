// softmax and log_softmax of CUDA tensors: the device half of tensor/softmax.cpp,
// with its numerics (the max subtracted before exp, a row holding NaN giving NaN, a
// row of -inf giving NaN), sums in float for 16-bit floats and in double for float32
// and float64. Asynchronous on the current stream of self's device.
#pragma once

#include <cstdint>

#include <thd/tensor.h>

namespace thd::cuda {

// Along `dim`, already wrapped (0 for a 0-dim tensor); a TypeError for a
// non-floating dtype, as on the CPU.
Tensor softmax(const Tensor& self, int64_t dim, bool log);

}  // namespace thd::cuda
