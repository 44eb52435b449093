# tensor/cuda sources of the elementwise family (see tensor/CMakeLists.txt): the
# generic launch (elementwise_loops.cuh, offset_calculator.cuh) instantiated for each
# op group in a file of its own, so the groups compile in parallel.
list(APPEND THD_TENSOR_CUDA_SOURCES
  binary_arith_kernels.cu
  binary_divpow_kernels.cu
  binary_minmax_kernels.cu
  compare_kernels.cu
  copy_kernel.cu
  unary_basic_kernels.cu
  unary_exp_kernels.cu
  unary_trig_kernels.cu
  where_clamp_kernels.cu
)
