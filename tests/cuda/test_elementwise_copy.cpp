// copy_ within a CUDA device (to(dtype), contiguous(), clone()) between every pair of
// dtypes and for strided and broadcast sources, and fill_ for every dtype, against the
// CPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "elementwise_test_util.h"

namespace thd {
namespace {

using testing::expect_matches_cpu;
using testing::expect_same_as_cpu;
using testing::kAllDTypes;
using testing::named;
using testing::poisoned_cuda;
using testing::random_cpu;

// Values that probe conversions: fractions, negatives, out of every integer range,
// NaN and infinities, beyond float16's range.
Tensor probing_values() {
  const double inf = std::numeric_limits<double>::infinity();
  return Tensor::from_vector<double>({0.0,          -0.0,  0.5,   -0.5,    1.5,       -2.5,
                                      127.0,        128.0, 255.0, 256.0,   -129.0,    3e9,
                                      -3e9,         1e19,  -1e19, 70000.0, 65519.0,   1e-8,
                                      std::nan(""), inf,   -inf,  0.1,     1.0 / 3.0, 16777217.0});
}

TEST(CudaCopy, EveryDTypePair) {
  THD_REQUIRE_CUDA();
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      const std::string what = named("to", from) + " -> " + std::string(dtype_name(to));
      expect_same_as_cpu(
          {random_cpu({3, 129}, from)}, [&](std::vector<Tensor>& t) { return t[0].to(to); }, what);
      expect_same_as_cpu(
          {probing_values().to(from)}, [&](std::vector<Tensor>& t) { return t[0].to(to); },
          what + " probing values");
      expect_same_as_cpu(
          {random_cpu({129, 3}, from)}, [&](std::vector<Tensor>& t) { return t[0].t().to(to); },
          what + " transposed");
    }
  }
}

TEST(CudaCopy, IntoViewsFromViews) {
  THD_REQUIRE_CUDA();
  for (DType dst : {kFloat32, kFloat16, kInt64, kBool, kUInt8}) {
    for (DType src : {kFloat32, kInt32, kBFloat16, kFloat64}) {
      const std::string what = named("copy_", src) + " into " + std::string(dtype_name(dst));
      // Into a stepped slice from a transposed source; the rest of dst stays.
      expect_same_as_cpu(
          {random_cpu({8, 40}, dst), random_cpu({20, 8}, src)},
          [](std::vector<Tensor>& t) {
            t[0].slice(1, 0, 40, 2).copy_(t[1].t());
            return t[0];
          },
          what);
      // Broadcast source (stride 0) and 0-dim source.
      expect_same_as_cpu(
          {random_cpu({6, 33}, dst), random_cpu({33}, src)},
          [](std::vector<Tensor>& t) { return t[0].copy_(t[1]); }, what + " broadcast");
      expect_same_as_cpu(
          {random_cpu({6, 33}, dst), random_cpu({}, src)},
          [](std::vector<Tensor>& t) { return t[0].copy_(t[1]); }, what + " 0-dim source");
    }
  }
  for (DType dt : kAllDTypes) {
    // Same dtype: bits moved, by element size.
    expect_same_as_cpu(
        {random_cpu({31, 17}, dt)}, [](std::vector<Tensor>& t) { return t[0].t().contiguous(); },
        named("contiguous", dt));
    expect_same_as_cpu(
        {random_cpu({31, 17}, dt), random_cpu({17, 31}, dt)},
        [](std::vector<Tensor>& t) { return t[1].copy_(t[0].t()); }, named("copy_ transposed", dt));
    expect_same_as_cpu(
        {random_cpu({1000}, dt)}, [](std::vector<Tensor>& t) { return t[0].clone(); },
        named("clone", dt));
  }
}

TEST(CudaCopy, IntoPoisonedOutputs) {
  THD_REQUIRE_CUDA();
  const int64_t n = (int64_t{1} << 20) + 3;
  for (DType dst : {kFloat32, kFloat16, kInt8, kFloat64}) {
    for (DType src : {kFloat32, kInt64, kBool}) {
      Tensor cpu = random_cpu({n + 1}, src);
      // Source one element past alignment, destination aligned: the vector path
      // cannot serve both, every element must still be written.
      Tensor out = poisoned_cuda({n}, dst);
      out.copy_(cpu.cuda().slice(0, 1, n + 1));
      expect_matches_cpu(out, cpu.slice(0, 1, n + 1).to(dst));
      Tensor both = poisoned_cuda({n + 1}, dst);
      both.slice(0, 1, n + 1).copy_(cpu.cuda().slice(0, 1, n + 1));
      expect_matches_cpu(both.slice(0, 1, n + 1), cpu.slice(0, 1, n + 1).to(dst));
    }
  }
}

TEST(CudaFill, EveryDType) {
  THD_REQUIRE_CUDA();
  const std::vector<Scalar> values = {Scalar(0),    Scalar(1),   Scalar(-1),   Scalar(2.75),
                                      Scalar(true), Scalar(255), Scalar(-1e30)};
  for (DType dt : kAllDTypes) {
    for (const Scalar& v : values) {
      const std::string what = named("fill_", dt) + " " + ::testing::PrintToString(v);
      expect_same_as_cpu(
          {random_cpu({7, 1001}, dt)}, [&](std::vector<Tensor>& t) { return t[0].fill_(v); }, what);
      expect_same_as_cpu(
          {random_cpu({7, 101}, dt)},
          [&](std::vector<Tensor>& t) {
            t[0].slice(1, 1, 101, 3).fill_(v);
            return t[0];
          },
          what + " strided");
      expect_same_as_cpu(
          {random_cpu({}, dt)}, [&](std::vector<Tensor>& t) { return t[0].fill_(v); },
          what + " 0-dim");
      expect_same_as_cpu(
          {random_cpu({0, 5}, dt)}, [&](std::vector<Tensor>& t) { return t[0].fill_(v); },
          what + " empty");
    }
    // Into a poisoned tensor, one element past alignment.
    Tensor out = poisoned_cuda({(1 << 16) + 5}, dt);
    out.slice(0, 1, (1 << 16) + 5).fill_(1);
    Tensor want = Tensor::ones({(1 << 16) + 4}, dt);
    expect_matches_cpu(out.slice(0, 1, (1 << 16) + 5), want);
  }
}

// More than 2^31 elements: 64-bit indices on the flat path, pieces on the strided one.
TEST(CudaElementwise, BeyondInt32Elements) {
  THD_REQUIRE_CUDA();
  size_t free_bytes = 0;
  size_t total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  const int64_t n = (int64_t{1} << 31) + 77;
  if (free_bytes < 3 * static_cast<size_t>(n) + (size_t{1} << 30)) {
    GTEST_SKIP() << "needs " << 3 * n / (1 << 20) << " MiB of free GPU memory";
  }
  Tensor x = Tensor::full({n}, 3, kUInt8, Device::cuda(0));
  Tensor y = x + 1;
  // Every other element, from the second: its offsets pass 2^31 bytes.
  Tensor odd = x.slice(0, 1, n, 2);
  odd.add_(5);
  auto tail = [&](const Tensor& t) { return t.slice(0, n - 6, n).cpu().to_vector<int64_t>(); };
  EXPECT_EQ(tail(y), (std::vector<int64_t>{4, 4, 4, 4, 4, 4}));
  // n - 6 is odd (n is odd), so the tail starts at an odd index.
  EXPECT_EQ(tail(x), (std::vector<int64_t>{8, 3, 8, 3, 8, 3}));
  EXPECT_EQ(x.slice(0, 0, 4).cpu().to_vector<int64_t>(), (std::vector<int64_t>{3, 8, 3, 8}));
}

}  // namespace
}  // namespace thd
