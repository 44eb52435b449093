// THD_HOST_DEVICE marks a function that the CPU loops and the CUDA kernels both call
// (the op functors of tensor/functors/, the wrapping integer math of int_math.h):
// __host__ __device__ when nvcc compiles the file, nothing for the C++ compiler.
#pragma once

#ifdef __CUDACC__
#define THD_HOST_DEVICE __host__ __device__
#else
#define THD_HOST_DEVICE
#endif
