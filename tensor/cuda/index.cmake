# tensor/cuda sources of the index family (see tensor/CMakeLists.txt): index_select,
# gather, scatter, masked_fill, sort and topk. sort_radix.cu holds the CUB sort alone,
# the slowest file to compile, so it builds in parallel with the rest.
list(APPEND THD_TENSOR_CUDA_SOURCES
  index_gather.cu
  index_scatter.cu
  sort.cu
  sort_radix.cu
)
