# tensor/cuda sources of the reduce family (see tensor/CMakeLists.txt): reductions
# (one .cu per op group, so they compile in parallel) and softmax.
list(APPEND THD_TENSOR_CUDA_SOURCES
  reduce_arg.cu
  reduce_entry.cpp
  reduce_extreme.cu
  reduce_logical.cu
  reduce_plan.cpp
  reduce_sum.cu
  reduce_var.cu
  softmax.cu
)
