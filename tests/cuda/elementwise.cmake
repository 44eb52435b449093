# tests/cuda sources of the elementwise family.
list(APPEND THD_CUDA_TEST_SOURCES
  test_elementwise_binary.cpp
  test_elementwise_compare.cpp
  test_elementwise_copy.cpp
  test_elementwise_unary.cpp
)
