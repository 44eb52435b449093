# tensor/cuda sources of the core family (see tensor/CMakeLists.txt): devices,
# streams, the caching device allocator, pinned host memory and transfers.
list(APPEND THD_TENSOR_CUDA_SOURCES
  caching_allocator.cpp
  cuda_error.cpp
  cuda_stream.cpp
  device.cpp
  event_pool.cpp
  pinned_allocator.cpp
  transfer.cpp
)
