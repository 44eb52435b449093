# tests/cuda sources of the runtime family: DistributedTensors on the workers' GPUs.
# They need a master-worker job (tests/runtime/local_job.h: the binary is its own
# worker), so they are a binary of their own beside thd_cuda_tests; like it, every
# test skips with "no CUDA device" where there is no GPU.
add_executable(thd_cuda_runtime_tests
  ${CMAKE_CURRENT_LIST_DIR}/test_runtime_cuda.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_runtime_cuda_streams.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_runtime_nccl.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda_test_util.cpp
  ${PROJECT_SOURCE_DIR}/tests/runtime/local_job.cpp
  ${PROJECT_SOURCE_DIR}/tests/runtime/remote_check.cpp
  ${PROJECT_SOURCE_DIR}/tests/runtime/main.cpp
)
target_include_directories(thd_cuda_runtime_tests PRIVATE
  ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/tests/unit ${PROJECT_SOURCE_DIR}/tests/runtime
  ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(thd_cuda_runtime_tests PRIVATE thd::thd CUDA::cudart_static GTest::gtest thd_warnings)
gtest_discover_tests(thd_cuda_runtime_tests DISCOVERY_TIMEOUT 60
  PROPERTIES TIMEOUT 120 LABELS "runtime;cuda")
