# tensor/cuda sources of the linalg family (see tensor/CMakeLists.txt): matrix
# products through cuBLAS / cublasLt, and thd's integer GEMM and dot kernels.
list(APPEND THD_TENSOR_CUDA_SOURCES
  blas_handle.cpp
  gemm.cpp
  matmul.cpp
  matmul_kernels.cu
)
