// matmul / mm / bmm / addmm on CUDA tensors against the CPU ops, on fresh random
// inputs: every dtype, transposed and strided operands, broadcast batches, shapes
// with 1s and 0s, addmm's beta and alpha.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include <thd/tensor.h>

#include "cuda_test_util.h"

namespace thd {
namespace {

using testing::expect_matches_cpu;
using testing::poisoned_cuda;
using testing::random_cpu;

constexpr DType kNumeric[] = {kFloat32, kFloat64, kFloat16, kBFloat16,
                              kUInt8,   kInt8,    kInt32,   kInt64};
constexpr DType kFloats[] = {kFloat32, kFloat64, kFloat16, kBFloat16};

// Tolerance of a sum of k products of O(1) values: the result and its rounding error
// grow like sqrt(k), so the absolute part scales with it. float32 is held to full
// float32 accuracy (TF32 would fail it); the 16-bit types to two units in the last
// place of the rounded result, since the CPU and cuBLAS may round a float32 value
// that lies near a tie to neighbouring 16-bit values.
std::pair<double, double> product_tolerance(DType dt, int64_t k) {
  const double scale = std::sqrt(static_cast<double>(std::max<int64_t>(k, 1)));
  switch (dt) {
    case kFloat32: return {1e-5, 1e-5 * scale};
    case kFloat64: return {1e-12, 1e-12 * scale};
    case kFloat16: return {2e-3, 2e-3 * scale};
    case kBFloat16: return {1.6e-2, 1.6e-2 * scale};
    default: return {0, 0};
  }
}

void expect_product(const Tensor& gpu, const Tensor& cpu, int64_t k) {
  const auto [rtol, atol] = product_tolerance(cpu.dtype(), k);
  expect_matches_cpu(gpu, cpu, rtol, atol);
}

// A freed poisoned block the size of the result, so the caching allocator is likely
// to hand it to the op's output: an element the op forgets to write stays NaN / -1.
void poison_next_output(const Shape& shape, DType dt) { (void)poisoned_cuda(shape, dt); }

// A view taken of an operand on each side, so the CUDA operand has the strides the
// test means (a copy to the device makes its own layout).
using View = std::function<Tensor(const Tensor&)>;
Tensor same(const Tensor& t) { return t; }

// a and b: CPU tensors. Compares va(a) @ vb(b) on the GPU with the CPU's.
void check_matmul(const Tensor& a, const Tensor& b, const View& va = same,
                  const View& vb = same) {
  const Tensor ca = va(a), cb = vb(b);
  SCOPED_TRACE(shape_str(ca.shape()) + " @ " + shape_str(cb.shape()) + " " +
               std::string(dtype_name(a.dtype())));
  const Tensor want = ca.matmul(cb);
  poison_next_output(want.shape(), want.dtype());
  const Tensor ga = va(a.cuda()), gb = vb(b.cuda());
  EXPECT_EQ(ga.strides(), ca.strides());
  EXPECT_EQ(gb.strides(), cb.strides());
  expect_product(ga.matmul(gb), want, ca.size(-1));
}

TEST(CudaLinalg, MatmulShapesEveryDtype) {
  THD_REQUIRE_CUDA();
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{37, 53}, {53, 29}},          // odd sizes
      {{1, 8}, {8, 1}},              // 1 x 1 result
      {{6, 1}, {1, 5}},              // k = 1
      {{1, 40}, {40, 33}},           // one row
      {{33, 40}, {40, 1}},           // one column
      {{40}, {40, 9}},               // vector @ matrix
      {{9, 40}, {40}},               // matrix @ vector
      {{57}, {57}},                  // dot
      {{3, 5, 7}, {3, 7, 4}},        // batched
      {{2, 3, 5, 7}, {7, 4}},        // batch folds into one GEMM
      {{2, 1, 5, 7}, {3, 7, 4}},     // broadcast batch dims
      {{4, 5, 7}, {7}},              // batched matrix @ vector
      {{7}, {2, 7, 3}},              // vector @ batched matrix
      {{1, 1, 6, 7}, {1, 7, 6}},     // batch dims of 1
  };
  for (DType dt : kNumeric) {
    for (const auto& [sa, sb] : shapes) check_matmul(random_cpu(sa, dt), random_cpu(sb, dt));
  }
}

TEST(CudaLinalg, LargerProductsReachTheTensorCoreKernels) {
  THD_REQUIRE_CUDA();
  for (DType dt : kFloats) {
    check_matmul(random_cpu({257, 384}, dt), random_cpu({384, 129}, dt));
    check_matmul(random_cpu({64, 2048}, dt), random_cpu({2048, 48}, dt));  // split-K shapes
    check_matmul(random_cpu({8, 96, 64}, dt), random_cpu({8, 64, 80}, dt));
  }
  check_matmul(random_cpu({70, 90}, kInt32), random_cpu({90, 50}, kInt32));
}

TEST(CudaLinalg, TransposedAndStridedOperands) {
  THD_REQUIRE_CUDA();
  for (DType dt : kNumeric) {
    const Tensor a = random_cpu({23, 31}, dt);
    const Tensor b = random_cpu({31, 17}, dt);
    const View t = [](const Tensor& x) { return x.t(); };  // column-major: CUBLAS_OP_T
    check_matmul(random_cpu({31, 23}, dt), b, t);
    check_matmul(a, random_cpu({17, 31}, dt), same, t);
    check_matmul(random_cpu({31, 23}, dt), random_cpu({17, 31}, dt), t, t);
    // Sliced: leading dims larger than the row, and steps in both dims (copied).
    check_matmul(random_cpu({23, 40}, dt), b, [](const Tensor& x) { return x.narrow(1, 3, 31); });
    check_matmul(random_cpu({31, 40}, dt), b,  // column-major, leading dim 40 > 23 rows
                 [](const Tensor& x) { return x.narrow(1, 5, 23).t(); });
    check_matmul(a, random_cpu({62, 34}, dt), same,
                 [](const Tensor& x) { return x.slice(0, 0, 62, 2).slice(1, 0, 34, 2); });
    // Expanded: a row repeated (stride 0), not expressible to BLAS.
    check_matmul(random_cpu({1, 31}, dt), b, [](const Tensor& x) { return x.expand({23, 31}); });
    check_matmul(a, random_cpu({31, 1}, dt), same,
                 [](const Tensor& x) { return x.expand({31, 17}); });
    // Batched transposes and a permuted batch.
    check_matmul(random_cpu({4, 31, 23}, dt), random_cpu({4, 31, 17}, dt),
                 [](const Tensor& x) { return x.transpose(-1, -2); });
    check_matmul(random_cpu({23, 4, 31}, dt), random_cpu({4, 17, 31}, dt),
                 [](const Tensor& x) { return x.permute({1, 0, 2}); },
                 [](const Tensor& x) { return x.transpose(1, 2); });
  }
}

TEST(CudaLinalg, BroadcastBatchesLoopOverOuterDims) {
  THD_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kBFloat16, kInt64}) {
    // Strides that do not chain: one strided-batched call per outer index.
    check_matmul(random_cpu({2, 1, 3, 4}, dt), random_cpu({1, 5, 4, 6}, dt));
    check_matmul(random_cpu({3, 1, 2, 1, 3, 4}, dt), random_cpu({2, 5, 4, 6}, dt));
    // One operand broadcast over the whole batch (batch stride 0).
    check_matmul(random_cpu({3, 4}, dt), random_cpu({5, 4, 6}, dt),
                 [](const Tensor& x) { return x.expand({5, 3, 4}); });
    check_matmul(random_cpu({5, 3, 4}, dt), random_cpu({1, 4, 6}, dt));
    // Many tiny products.
    check_matmul(random_cpu({700, 3, 2}, dt), random_cpu({700, 2, 5}, dt));
  }
}

TEST(CudaLinalg, MmAndBmm) {
  THD_REQUIRE_CUDA();
  for (DType dt : kNumeric) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = random_cpu({12, 9}, dt), b = random_cpu({9, 14}, dt);
    expect_product(a.cuda().mm(b.cuda()), a.mm(b), 9);
    expect_product(a.t().contiguous().cuda().t().mm(b.cuda()), a.mm(b), 9);
    const Tensor x = random_cpu({6, 12, 9}, dt), y = random_cpu({6, 9, 14}, dt);
    expect_product(x.cuda().bmm(y.cuda()), x.bmm(y), 9);
    expect_product(x.cuda().bmm(y.transpose(1, 2).contiguous().cuda().transpose(1, 2)),
                   x.bmm(y), 9);
  }
}

TEST(CudaLinalg, ZeroSizedDims) {
  THD_REQUIRE_CUDA();
  const Device gpu = Device::cuda(0);
  for (DType dt : kNumeric) {
    SCOPED_TRACE(dtype_name(dt));
    // k = 0: every element is an empty sum, 0.
    poison_next_output({3, 4}, dt);
    expect_matches_cpu(Tensor::empty({3, 0}, dt, gpu).mm(Tensor::empty({0, 4}, dt, gpu)),
                       Tensor::zeros({3, 4}, dt));
    poison_next_output({2, 3, 2}, dt);
    expect_matches_cpu(Tensor::empty({2, 3, 0}, dt, gpu).matmul(Tensor::empty({0, 2}, dt, gpu)),
                       Tensor::zeros({2, 3, 2}, dt));
    expect_matches_cpu(Tensor::empty({0}, dt, gpu).matmul(Tensor::empty({0}, dt, gpu)),
                       Tensor::zeros({}, dt));
    // Empty results keep their shapes.
    EXPECT_EQ(Tensor::empty({0, 3}, dt, gpu).mm(Tensor::empty({3, 4}, dt, gpu)).shape(),
              (Shape{0, 4}));
    EXPECT_EQ(Tensor::empty({0, 2, 3}, dt, gpu).bmm(Tensor::empty({0, 3, 4}, dt, gpu)).shape(),
              (Shape{0, 2, 4}));
    EXPECT_EQ(Tensor::empty({0, 1, 2, 3}, dt, gpu).matmul(Tensor::empty({5, 3, 4}, dt, gpu)).shape(),
              (Shape{0, 5, 2, 4}));
    // k = 0 in addmm: beta * self, alpha irrelevant.
    const Tensor self = random_cpu({2, 3}, dt);
    const Tensor e1 = Tensor::empty({2, 0}, dt), e2 = Tensor::empty({0, 3}, dt);
    expect_matches_cpu(self.cuda().addmm(e1.cuda(), e2.cuda(), 2, 7), self.addmm(e1, e2, 2, 7));
  }
}

TEST(CudaLinalg, AddmmBetaAlpha) {
  THD_REQUIRE_CUDA();
  for (DType dt : kNumeric) {
    SCOPED_TRACE(dtype_name(dt));
    const bool fl = is_floating_point(dt);
    const Scalar beta = fl ? Scalar(0.5) : Scalar(2);
    const Scalar alpha = fl ? Scalar(-1.5) : Scalar(3);
    const Tensor m1 = random_cpu({19, 24}, dt);
    const Tensor m2 = random_cpu({15, 24}, dt).t();
    for (const Shape& self_shape : {Shape{19, 15}, Shape{15}, Shape{1, 15}, Shape{19, 1}, Shape{}}) {
      SCOPED_TRACE(shape_str(self_shape));
      const Tensor self = random_cpu(self_shape, dt);
      const Tensor self_gpu = self.cuda();
      poison_next_output({19, 15}, dt);
      expect_product(self_gpu.addmm(m1.cuda(), m2.cuda(), beta, alpha),
                     self.addmm(m1, m2, beta, alpha), 24);
      expect_matches_cpu(self_gpu, self, 0, 0);  // self untouched
    }
    const Tensor self = random_cpu({19, 15}, dt);
    expect_product(self.cuda().addmm(m1.cuda(), m2.cuda()), self.addmm(m1, m2), 24);
  }
}

TEST(CudaLinalg, AddmmBetaZeroIgnoresNanSelf) {
  THD_REQUIRE_CUDA();
  for (DType dt : kFloats) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor self = Tensor::full({9, 7}, std::numeric_limits<double>::quiet_NaN(), dt);
    const Tensor m1 = random_cpu({9, 11}, dt), m2 = random_cpu({11, 7}, dt);
    const Tensor want = self.addmm(m1, m2, 0, 0.5);
    const Tensor got = self.cuda().addmm(m1.cuda(), m2.cuda(), 0, 0.5);
    expect_product(got, want, 11);
    for (double x : got.cpu().to_vector<double>()) ASSERT_TRUE(std::isfinite(x));
    // beta != 0: the NaNs come through, as on the CPU.
    for (double x : self.cuda().addmm(m1.cuda(), m2.cuda(), 1, 1).cpu().to_vector<double>()) {
      EXPECT_TRUE(std::isnan(x));
    }
  }
}

TEST(CudaLinalg, IntegerProductsWrapLikeTheCpu) {
  THD_REQUIRE_CUDA();
  const Tensor a8 = Tensor::from_vector<int64_t>({100, 100, -128, 127}, {2, 2}).to(kInt8);
  const Tensor u8 = Tensor::from_vector<int64_t>({200, 200, 1, 255}, {2, 2}).to(kUInt8);
  const Tensor a32 = Tensor::from_vector<int64_t>({65536, -65536, 1 << 30, 7}, {2, 2}).to(kInt32);
  const Tensor a64 = Tensor::from_vector<int64_t>({int64_t{1} << 62, -5, 3, int64_t{1} << 61}, {2, 2});
  for (const Tensor& t : {a8, u8, a32, a64}) {
    SCOPED_TRACE(dtype_name(t.dtype()));
    expect_matches_cpu(t.cuda().mm(t.t().cuda()), t.mm(t.t()));
    expect_matches_cpu(t.cuda().addmm(t.cuda(), t.cuda(), 3, 5), t.addmm(t, t, 3, 5));
  }
}

TEST(CudaLinalg, SixteenBitProductsRoundOnceFromFloat32) {
  THD_REQUIRE_CUDA();
  // Long sums whose float32 result sits far from the 16-bit neighbours' midpoint
  // only if accumulation stayed in float32: products of exact small integers.
  for (DType dt : {kFloat16, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = Tensor::randint(-3, 4, {16, 4096}, kInt64).to(dt);
    const Tensor b = Tensor::randint(-3, 4, {4096, 16}, kInt64).to(dt);
    // Exact in float32 (|sum| <= 9 * 4096), so both sides round the same value.
    expect_matches_cpu(a.cuda().mm(b.cuda()), a.mm(b), 0, 0);
  }
}

}  // namespace
}  // namespace thd
