# tests/cuda sources of the core family: devices and streams, the caching
# allocator and pinned memory, transfers and copies.
list(APPEND THD_CUDA_TEST_SOURCES
  test_core_allocator.cpp
  test_core_device.cpp
  test_core_transfer.cpp
)
