// dot and outer on CUDA tensors against the CPU; the errors of the matrix products
// (mixed devices, shapes, dtypes); products issued from several threads and streams.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <thd/tensor.h>

#include "cuda_test_util.h"
#include "tensor/cuda/cuda_stream.h"

namespace thd {
namespace {

using testing::expect_matches_cpu;
using testing::random_cpu;

constexpr DType kNumeric[] = {kFloat32, kFloat64, kFloat16, kBFloat16,
                              kUInt8,   kInt8,    kInt32,   kInt64};

// The GPU multiplies and accumulates in double (integers wrap), so it matches the
// exact product to the result's rounding: a last-place tie at most.
std::pair<double, double> dot_tolerance(DType dt) {
  switch (dt) {
    case kFloat32: return {1e-6, 1e-6};
    case kFloat64: return {1e-12, 1e-12};
    case kFloat16: return {1e-3, 1e-3};
    case kBFloat16: return {8e-3, 8e-3};
    default: return {0, 0};
  }
}

// A view taken of an operand on each side, so the CUDA operand has the strides the
// test means (a copy to the device makes its own layout).
using View = std::function<Tensor(const Tensor&)>;
Tensor same(const Tensor& t) { return t; }

void check_dot(const Tensor& a, const Tensor& b, const View& va = same, const View& vb = same) {
  const Tensor ca = va(a), cb = vb(b), ga = va(a.cuda()), gb = vb(b.cuda());
  SCOPED_TRACE(std::to_string(ca.numel()) + " elements, " + std::string(dtype_name(a.dtype())));
  EXPECT_EQ(ga.strides(), ca.strides());
  const auto [rtol, atol] = dot_tolerance(a.dtype());
  const Tensor got = ga.dot(gb);
  EXPECT_EQ(got.dim(), 0);
  // float32's reference is the float64 product rounded once: the CPU op goes through
  // OpenBLAS's dsdot, whose kernels may sum in float32 and drift by ~sqrt(n) ulps of
  // the terms (3e-5 over 100003 random terms, seen on the H100 run).
  const Tensor want = a.dtype() == kFloat32 ? ca.to(kFloat64).dot(cb.to(kFloat64)).to(kFloat32) : ca.dot(cb);
  expect_matches_cpu(got, want, rtol, atol);
  expect_matches_cpu(ga.matmul(gb), want, rtol, atol);
}

TEST(CudaLinalg, DotEveryDtypeAndLength) {
  THD_REQUIRE_CUDA();
  for (DType dt : kNumeric) {
    for (int64_t n : {0, 1, 7, 2048, 2049, 100003}) {
      check_dot(random_cpu({n}, dt), random_cpu({n}, dt));
    }
    // Strided and expanded operands.
    check_dot(random_cpu({2 * 999}, dt), random_cpu({999}, dt),
              [](const Tensor& x) { return x.slice(0, 1, 2 * 999, 2); });
    check_dot(random_cpu({1}, dt), random_cpu({513}, dt),
              [](const Tensor& x) { return x.expand({513}); });
    check_dot(random_cpu({40, 3}, dt), random_cpu({40, 5}, dt),
              [](const Tensor& x) { return x.select(1, 2); },
              [](const Tensor& x) { return x.select(1, 0); });
  }
}

TEST(CudaLinalg, DotOfManyBlocksAccumulatesInDouble) {
  THD_REQUIRE_CUDA();
  // 1 + many tiny terms: a float32 accumulator would drop every tiny one.
  const int64_t n = (int64_t{1} << 20) + 3;
  Tensor a = Tensor::full({n}, 1e-4, kFloat32);
  Tensor b = Tensor::full({n}, 1e-4, kFloat32);
  a.narrow(0, 0, 1).fill_(1);
  b.narrow(0, 0, 1).fill_(1);
  const double tiny = static_cast<double>(1e-4f) * static_cast<double>(1e-4f);
  const double want = 1 + static_cast<double>(n - 1) * tiny;
  EXPECT_NEAR(a.cuda().dot(b.cuda()).item<double>(), want, 1e-6);
  EXPECT_NEAR(a.cuda().dot(b.cuda()).item<double>(), a.dot(b).item<double>(), 1e-6);
}

TEST(CudaLinalg, OuterEveryDtypeAndPromotion) {
  THD_REQUIRE_CUDA();
  for (DType dt : {kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32,
                   kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = random_cpu({33}, dt);
    const Tensor b = random_cpu({2 * 41}, dt);
    expect_matches_cpu(a.cuda().outer(b.cuda().slice(0, 0, 2 * 41, 2)),
                       a.outer(b.slice(0, 0, 2 * 41, 2)));
    const Tensor one = random_cpu({1}, dt);
    expect_matches_cpu(one.cuda().expand({5}).outer(a.cuda()), one.expand({5}).outer(a));
  }
}

TEST(CudaLinalg, OuterPromotesLikeMul) {
  THD_REQUIRE_CUDA();
  const Tensor a = random_cpu({6}, kInt32), b = random_cpu({4}, kFloat32);
  const Tensor got = a.cuda().outer(b.cuda());
  EXPECT_EQ(got.dtype(), kFloat32);
  expect_matches_cpu(got, a.outer(b));
  expect_matches_cpu(Tensor::empty({0}, kInt64).cuda().outer(b.cuda()),
                     Tensor::empty({0}, kInt64).outer(b));
}

// The message of an error op() raises, or "" with a failure when it raises none.
template <typename Error, typename F>
std::string error_of(F&& op) {
  try {
    op();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error raised";
  return "";
}

void expect_mixed_devices(const std::string& message) {
  EXPECT_NE(message.find("expected all tensors on one device"), std::string::npos) << message;
}

TEST(CudaLinalg, MixedDevicesAreValueErrors) {
  THD_REQUIRE_CUDA();
  const Tensor a = random_cpu({3, 4}, kFloat32), b = random_cpu({4, 5}, kFloat32);
  const Tensor ag = a.cuda(), bg = b.cuda();
  expect_mixed_devices(error_of<ValueError>([&] { (void)ag.matmul(b); }));
  expect_mixed_devices(error_of<ValueError>([&] { (void)a.matmul(bg); }));
  expect_mixed_devices(error_of<ValueError>([&] { (void)ag.mm(b); }));
  expect_mixed_devices(
      error_of<ValueError>([&] { (void)ag.unsqueeze(0).bmm(b.unsqueeze(0)); }));
  const Tensor self = random_cpu({3, 5}, kFloat32);
  expect_mixed_devices(error_of<ValueError>([&] { (void)self.addmm(ag, bg); }));
  expect_mixed_devices(error_of<ValueError>([&] { (void)self.cuda().addmm(a, bg); }));
  const Tensor v = random_cpu({4}, kFloat32);
  expect_mixed_devices(error_of<ValueError>([&] { (void)v.cuda().dot(v); }));
  expect_mixed_devices(error_of<ValueError>([&] { (void)v.matmul(v.cuda()); }));
  expect_mixed_devices(error_of<ValueError>([&] { (void)v.outer(v.cuda()); }));
}

TEST(CudaLinalg, ShapeAndDtypeErrorsMatchTheCpu) {
  THD_REQUIRE_CUDA();
  const Tensor a = random_cpu({2, 3}, kFloat32), b = random_cpu({4, 5}, kFloat32);
  const Tensor ag = a.cuda(), bg = b.cuda();
  // The same exception and message as the CPU op (location aside).
  auto same = [](auto gpu_op, auto cpu_op) {
    const std::string g = error_of<Error>(gpu_op), c = error_of<Error>(cpu_op);
    EXPECT_EQ(g.substr(0, g.find(" (")), c.substr(0, c.find(" ("))) << g << "\nvs\n" << c;
  };
  same([&] { (void)ag.mm(bg); }, [&] { (void)a.mm(b); });
  same([&] { (void)ag.matmul(bg); }, [&] { (void)a.matmul(b); });
  EXPECT_NE(error_of<ShapeError>([&] { (void)ag.mm(bg); }).find("(2x3 and 4x5)"), std::string::npos);
  EXPECT_THROW((void)ag.mm(a.to(kFloat64).t().cuda()), TypeError);
  EXPECT_THROW((void)random_cpu({2, 2}, kBool).cuda().mm(random_cpu({2, 2}, kBool).cuda()),
               TypeError);
  EXPECT_THROW((void)random_cpu({3}, kBool).cuda().dot(random_cpu({3}, kBool).cuda()), TypeError);
  EXPECT_THROW((void)ag.unsqueeze(0).bmm(bg.unsqueeze(0)), ShapeError);
  EXPECT_THROW((void)random_cpu({2, 2, 3}, kFloat32).cuda().matmul(random_cpu({3, 3, 1}, kFloat32).cuda()),
               ShapeError);
  EXPECT_THROW((void)random_cpu({3}, kFloat32).cuda().dot(random_cpu({4}, kFloat32).cuda()),
               ShapeError);
  EXPECT_THROW((void)random_cpu({3}, kFloat32).cuda().addmm(ag, random_cpu({3, 5}, kFloat32).cuda()),
               ShapeError);
  EXPECT_THROW(
      (void)random_cpu({2, 5}, kInt32).cuda().addmm(random_cpu({2, 3}, kInt32).cuda(),
                                                     random_cpu({3, 5}, kInt32).cuda(), 0.5, 1),
      TypeError);
}

TEST(CudaLinalg, ProductsOnAnotherStream) {
  THD_REQUIRE_CUDA();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const Tensor a = random_cpu({96, 80}, kBFloat16), b = random_cpu({80, 72}, kBFloat16);
  const Tensor f = random_cpu({96, 80}, kFloat32), g = random_cpu({80, 72}, kFloat32);
  {
    // The thread's handles are rebound to this stream and back.
    cuda::StreamGuard on(0, stream);
    expect_matches_cpu(a.cuda().mm(b.cuda()), a.mm(b), 1.6e-2, 0.15);
    expect_matches_cpu(f.cuda().mm(g.cuda()), f.mm(g), 1e-5, 1e-4);
  }
  expect_matches_cpu(f.cuda().mm(g.cuda()), f.mm(g), 1e-5, 1e-4);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST(CudaLinalg, ProductsFromManyThreads) {
  THD_REQUIRE_CUDA();
  // Each thread leases its own cuBLAS handles; results must not interfere.
  constexpr int kThreads = 4;
  std::vector<Tensor> lhs, rhs, got(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    lhs.push_back(random_cpu({64 + t, 48}, t % 2 ? kBFloat16 : kFloat32));
    rhs.push_back(random_cpu({48, 40}, t % 2 ? kBFloat16 : kFloat32));
  }
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        const Tensor a = lhs[t].cuda(), b = rhs[t].cuda();
        Tensor r;
        for (int i = 0; i < 20; ++i) r = a.mm(b);
        got[t] = r.cpu();
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(errors[t], "") << "thread " << t;
    const Tensor want = lhs[t].mm(rhs[t]);
    const bool bf = want.dtype() == kBFloat16;
    expect_matches_cpu(got[t].cuda(), want, bf ? 1.6e-2 : 1e-5, bf ? 0.12 : 1e-4);
  }
}

}  // namespace
}  // namespace thd
