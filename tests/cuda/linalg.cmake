# tests/cuda sources of the linalg family: matmul / mm / bmm / addmm, dot and outer
# against the CPU, errors, threads and streams.
list(APPEND THD_CUDA_TEST_SOURCES
  test_linalg_matmul.cpp
  test_linalg_vector.cpp
)
