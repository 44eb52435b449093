// Copies between host memory and CUDA devices, and between devices: the byte
// movers, and copy_ for tensors of which at least one lives on a CUDA device.
//
// Host memory is pageable in general and DMA needs pinned memory, so a host<->device
// copy goes through pinned staging buffers (pinned_allocator.h) in chunks, two of
// them in flight: while the copy engine moves one chunk, host threads fill (or
// drain) the other, so a large copy runs near the link's bandwidth.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include <thd/tensor.h>

namespace thd::cuda {

// dst (device memory of `device`) <- src (any host memory), in order on `stream`.
// Returns once src has been read: src may be changed or freed at once, while the
// last chunks may still be on their way to the device.
void copy_host_to_device(void* dst, const void* src, size_t nbytes, int device,
                         cudaStream_t stream);
// dst (any host memory) <- src (device memory of `device`), in order on `stream`.
// Returns once the bytes are in dst, so it waits for the work queued on `stream`.
void copy_device_to_host(void* dst, const void* src, size_t nbytes, int device,
                         cudaStream_t stream);

// Tensor::copy_ when dst or src (or both) is a CUDA tensor: src already checked to
// broadcast to dst's shape, dst writable and not overlapping src. Converts dtypes
// and strides on whichever side moves fewer bytes; runs on the current streams of
// the devices involved. Copies to the host wait for the data; copies to a device
// return once the source was read.
void copy_tensor(const Tensor& dst, const Tensor& src);

}  // namespace thd::cuda
