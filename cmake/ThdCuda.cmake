# CUDA device code (THD_WITH_CUDA, resolved in ThdDependencies.cmake).
#
# THD_CUDA_ARCHITECTURES picks the GPUs the kernels are compiled for, in
# CMAKE_CUDA_ARCHITECTURES form. The default covers Ampere (sm_80) and Hopper (sm_90);
# every extra architecture costs a full compile of every kernel, so a build for one
# machine may name just its own (scripts/test builds CI for sm_90 alone).
if(NOT THD_WITH_CUDA)
  return()
endif()

set(THD_CUDA_ARCHITECTURES "80;90" CACHE STRING
    "GPU architectures the CUDA kernels are built for (CMAKE_CUDA_ARCHITECTURES form, e.g. 80;90)")
if(NOT CMAKE_CUDA_COMPILER AND CUDAToolkit_NVCC_EXECUTABLE)
  set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")
endif()
# nvcc must use the C++ compiler the rest of thd is built with: the host halves of
# the .cu files share types and the ABI with the .cpp files.
set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}")
set(CMAKE_CUDA_ARCHITECTURES "${THD_CUDA_ARCHITECTURES}")
enable_language(CUDA)
# thd's targets require C++20 (cxx_std_20), which CMake applies to their .cu files
# as well; CMake 3.25 does not know nvcc's flag for it (nvcc 12+ accepts it).
if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
# The CUDA runtime links statically (CUDA::cudart_static), so a thd build runs
# wherever a driver is, whatever runtime version is installed there.
set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
message(STATUS "thd: CUDA architectures: ${THD_CUDA_ARCHITECTURES}")

# Flags every thd .cu file is built with: host/device lambdas for the kernels'
# functors, constexpr helpers callable from device code, and the warnings the
# project treats as errors in C++ where nvcc can report them.
add_library(thd_cuda_flags INTERFACE)
target_compile_options(thd_cuda_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CUDA>:--extended-lambda --expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra
                              -Werror=all-warnings>)
# Kernels are built -O3 like the CPU's (tensor/CMakeLists.txt). nvcc warns when given
# two -O levels, so RelWithDebInfo's -O2 is raised in place rather than overridden.
string(REPLACE "-O2" "-O3" CMAKE_CUDA_FLAGS_RELWITHDEBINFO "${CMAKE_CUDA_FLAGS_RELWITHDEBINFO}")
