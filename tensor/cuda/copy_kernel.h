// Elementwise copy on one CUDA device: the kernel behind copy_, to(dtype) and
// contiguous() for CUDA tensors, and the device half of host<->device copies.
#pragma once

#include <thd/tensor.h>

namespace thd::cuda {

// dst[i] = convert(src[i]) for every element. dst and src have the same shape and
// live on the same CUDA device; any dtypes and strides (src may have stride-0 dims
// from broadcasting); dst must not overlap src unless they are the same view.
// Asynchronous on current_stream(dst's device). `op` names the caller in errors.
void copy_on_device(const Tensor& dst, const Tensor& src, const char* op);

// Every element of self (a CUDA tensor of any strides) set to value.
void fill_on_device(const Tensor& self, Scalar value, const char* op);

}  // namespace thd::cuda
