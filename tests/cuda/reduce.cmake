# tests/cuda sources of the reduce family.
list(APPEND THD_CUDA_TEST_SOURCES
  test_reduce.cpp
  test_reduce_edge.cpp
  test_softmax.cpp
)
