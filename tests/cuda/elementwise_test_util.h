// What the elementwise GPU tests share: every dtype, and running one op on CPU
// tensors and on their CUDA copies to compare the results, or the errors.
#pragma once

#include <functional>
#include <string>
#include <typeinfo>
#include <vector>

#include "cuda_test_util.h"

namespace thd::testing {

inline const std::vector<DType> kAllDTypes = {kBool,    kUInt8,    kInt8,    kInt32,  kInt64,
                                              kFloat16, kBFloat16, kFloat32, kFloat64};

// An op over a list of base tensors (it makes its own views of them, so the CPU and
// the GPU run the very same views), returning the tensor to compare.
using TensorOp = std::function<Tensor(std::vector<Tensor>&)>;

// Runs op on `inputs` and on CUDA copies of them (made before op runs, as op may write
// its inputs). Both succeed and the CUDA result matches the CPU's (shape, dtype and
// values within tolerance_for the result's dtype), or both throw the same error type.
inline void expect_same_as_cpu(const std::vector<Tensor>& inputs, const TensorOp& op,
                               const std::string& what) {
  SCOPED_TRACE(what);
  std::vector<Tensor> cpu;
  std::vector<Tensor> gpu;
  for (const Tensor& t : inputs) {
    cpu.push_back(t.clone());
    gpu.push_back(t.cuda());
  }
  auto run = [&](std::vector<Tensor>& args, Tensor& result) -> std::string {
    try {
      result = op(args);
      return "";
    } catch (const std::exception& e) {
      return std::string(typeid(e).name());
    }
  };
  Tensor want;
  Tensor got;
  const std::string cpu_error = run(cpu, want);
  const std::string gpu_error = run(gpu, got);
  ASSERT_EQ(gpu_error, cpu_error) << "the CPU and the GPU differ in raising";
  if (!cpu_error.empty()) return;
  expect_matches_cpu(got, want);
}

// Name for traces: "add float16".
inline std::string named(const std::string& op, DType dtype) {
  return op + " " + std::string(dtype_name(dtype));
}

}  // namespace thd::testing
