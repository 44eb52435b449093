# tests/cuda sources of the index family: index_select, gather, scatter, masked_fill,
# sort, topk, cat and stack.
list(APPEND THD_CUDA_TEST_SOURCES
  test_index.cpp
  test_join.cpp
  test_sort.cpp
)
