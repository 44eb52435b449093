#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include <thd/tensor.h>

#include "tensor/reference.h"

namespace thd {
namespace {

using test::values;

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// What storing an exact (integer-valued or float) result in dtype gives: integers wrap
// modulo 2^bits as two's complement, floats round.
double stored(DType dt, double v) {
  switch (dt) {
    case kUInt8: return static_cast<uint8_t>(static_cast<int64_t>(v));
    case kInt8: return static_cast<int8_t>(static_cast<int64_t>(v));
    case kInt32: return static_cast<int32_t>(static_cast<int64_t>(v));
    case kInt64: return v;
    default: return test::round_to(dt, v);
  }
}

std::vector<double> stored(DType dt, std::vector<double> v) {
  for (double& x : v) x = stored(dt, x);
  return v;
}

// Reference batched product in double over row-major values: a of shape as
// ([..., n, k]) and b of shape bs ([..., k, m]), batch dims broadcast to `batch`.
// Result: batch + [n, m], row-major.
std::vector<double> ref_matmul(const std::vector<double>& a, const Shape& as,
                               const std::vector<double>& b, const Shape& bs, const Shape& batch) {
  const int64_t n = as[as.size() - 2], k = as.back(), m = bs.back();
  EXPECT_EQ(bs[bs.size() - 2], k);
  const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const int64_t count = numel_of(batch);
  std::vector<double> out;
  for (int64_t t = 0; t < count; ++t) {
    // Batch multi-index of t, then the (broadcast) batch index into a and b.
    std::vector<int64_t> idx(batch.size());
    int64_t rem = t;
    for (size_t d = batch.size(); d-- > 0;) {
      idx[d] = rem % batch[d];
      rem /= batch[d];
    }
    auto linear = [&](const Shape& own) {
      int64_t li = 0;
      for (size_t d = 0; d < own.size(); ++d) {
        const int64_t i = own[d] == 1 ? 0 : idx[batch.size() - own.size() + d];
        li = li * own[d] + i;
      }
      return li;
    };
    const int64_t ta = linear(ab), tb = linear(bb);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += a[(ta * n + i) * k + p] * b[(tb * k + p) * m + j];
        out.push_back(s);
      }
    }
  }
  return out;
}

std::vector<double> ref_mm(const Tensor& a, const Tensor& b) {
  return ref_matmul(values(a), a.shape(), values(b), b.shape(), {});
}

// ---- mm / matmul of 2-D operands ----------------------------------------------------

TEST(Linalg, MmEveryDtype) {
  for (DType dt : test::numeric_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = test::sample_tensor({3, 5}, dt, 1);
    Tensor b = test::sample_tensor({5, 4}, dt, 2);
    const std::vector<double> want = stored(dt, ref_mm(a, b));
    Tensor c = a.mm(b);
    EXPECT_EQ(c.dtype(), dt);
    EXPECT_EQ(c.shape(), (Shape{3, 4}));
    EXPECT_TRUE(c.is_contiguous());
    EXPECT_TRUE(test::close(c, want));
    EXPECT_TRUE(test::close(a.matmul(b), want));
    EXPECT_TRUE(test::close(matmul(a, b), want));
  }
}

TEST(Linalg, MmLargerThanBlasBlocks) {
  // Sizes past OpenBLAS's register and cache blocking, with odd remainders.
  for (DType dt : {kFloat32, kFloat64, kInt32, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = test::sample_tensor({67, 131}, dt, 3);
    Tensor b = test::sample_tensor({131, 45}, dt, 4);
    EXPECT_TRUE(test::close(a.mm(b), stored(dt, ref_mm(a, b))));
  }
}

TEST(Linalg, MmRandomFloat32AgainstDouble) {
  std::mt19937 rng(7);
  std::normal_distribution<double> nd;
  const int64_t n = 150, k = 300, m = 90;
  std::vector<double> av(n * k), bv(k * m);
  for (auto& x : av) x = static_cast<float>(nd(rng));
  for (auto& x : bv) x = static_cast<float>(nd(rng));
  Tensor a = test::make({n, k}, kFloat32, av);
  Tensor b = test::make({k, m}, kFloat32, bv);
  // float32 accumulation over k terms of size ~1: error ~ sqrt(k) * eps * typical sum.
  EXPECT_TRUE(test::close(a.matmul(b), ref_matmul(av, {n, k}, bv, {k, m}, {}), 1e-5, 1e-4));
}

// Operands whose layouts BLAS reads directly (transposed, padded rows, offsets) and
// ones it cannot (expanded rows, steps in both dims), for every dtype.
TEST(Linalg, MmNonContiguousOperands) {
  for (DType dt : test::numeric_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t n = 4, k = 6, m = 5;
    Tensor a = test::sample_tensor({n, k}, dt, 11);
    Tensor b = test::sample_tensor({k, m}, dt, 12);
    const std::vector<double> want = stored(dt, ref_mm(a, b));

    Tensor at = a.t().contiguous().t();  // a's values, column-major
    ASSERT_EQ(at.strides(), (Shape{1, n}));
    Tensor bt = b.t().contiguous().t();
    EXPECT_TRUE(test::close(at.mm(b), want));
    EXPECT_TRUE(test::close(a.mm(bt), want));
    EXPECT_TRUE(test::close(at.mm(bt), want));

    // Rows padded (leading dim > cols) and a storage offset: a slice of a wider tensor.
    Tensor wide = Tensor::zeros({n + 1, k + 3}, dt);
    wide.narrow(0, 1, n).narrow(1, 2, k).copy_(a);
    Tensor padded = wide.narrow(0, 1, n).narrow(1, 2, k);
    EXPECT_GT(padded.storage_offset(), 0);
    EXPECT_TRUE(test::close(padded.mm(b), want));

    // Step 2 along the columns: neither row- nor column-major.
    Tensor stepped = Tensor::zeros({n, 2 * k}, dt);
    stepped.slice(1, 0, 2 * k, 2).copy_(a);
    EXPECT_TRUE(test::close(stepped.slice(1, 0, 2 * k, 2).mm(b), want));
    Tensor bstep = Tensor::zeros({2 * k, 2 * m}, dt);
    bstep.slice(0, 0, 2 * k, 2).slice(1, 0, 2 * m, 2).copy_(b);
    EXPECT_TRUE(test::close(a.mm(bstep.slice(0, 0, 2 * k, 2).slice(1, 0, 2 * m, 2)), want));

    // Expanded: one row repeated (stride 0 rows), one column repeated.
    Tensor row = test::sample_tensor({1, k}, dt, 13);
    Tensor rows = row.expand({n, k});
    EXPECT_TRUE(test::close(rows.mm(b), stored(dt, ref_mm(rows.contiguous(), b))));
    Tensor col = test::sample_tensor({k, 1}, dt, 14);
    Tensor cols = col.expand({k, m});
    EXPECT_TRUE(test::close(a.mm(cols), stored(dt, ref_mm(a, cols.contiguous()))));
  }
}

TEST(Linalg, MmVectorShapedMatrices) {
  // n = 1, m = 1 and k = 1, where a size-1 dim's stride is arbitrary.
  for (DType dt : {kFloat32, kFloat64, kInt64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor big = test::sample_tensor({6, 7}, dt, 21);
    Tensor a = big.slice(0, 2, 3);                    // [1, 7], row stride 7
    Tensor b = big.t().slice(1, 1, 2);                // [7, 1], strides (1, 7)
    EXPECT_TRUE(test::close(a.mm(b), stored(dt, ref_mm(a, b))));
    Tensor c = big.slice(1, 3, 4);                    // [6, 1], strides (7, 1)
    Tensor d = big.slice(0, 4, 5);                    // [1, 7]
    EXPECT_TRUE(test::close(c.mm(d), stored(dt, ref_mm(c, d))));
    Tensor e = big.t().slice(0, 0, 1);                // [1, 6], strides (1, 7)
    EXPECT_TRUE(test::close(e.mm(c), stored(dt, ref_mm(e, c))));
  }
}

// Matrix-vector shapes (n = 1 or m = 1) with every operand layout: row-major,
// column-major, stepped, expanded; also under addmm with and without self.
TEST(Linalg, MatrixVectorLayouts) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kInt64}) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t n = 5, k = 7;
    Tensor base = test::sample_tensor({n, k}, dt, 121);
    Tensor mats[] = {base, base.t().contiguous().t(),
                     [&] {
                       Tensor w = Tensor::zeros({n, 3 * k}, dt);
                       w.slice(1, 0, 3 * k, 3).copy_(base);
                       return w.slice(1, 0, 3 * k, 3);
                     }()};
    Tensor vbase = test::sample_tensor({k}, dt, 122);
    Tensor vecs[] = {vbase,
                     [&] {
                       Tensor w = Tensor::zeros({2 * k}, dt);
                       w.slice(0, 0, 2 * k, 2).copy_(vbase);
                       return w.slice(0, 0, 2 * k, 2);
                     }(),
                     test::sample_tensor({1}, dt, 123).expand({k})};
    for (const Tensor& a : mats) {
      for (const Tensor& v : vecs) {
        const std::vector<double> av = values(a), vv = values(v);
        const std::vector<double> want = stored(dt, ref_matmul(av, {n, k}, vv, {k, 1}, {}));
        EXPECT_TRUE(test::close(a.matmul(v), want));                    // m = 1
        EXPECT_TRUE(test::close(a.mm(v.unsqueeze(1)), want));           // [k, 1] column
        EXPECT_TRUE(test::close(v.matmul(a.t()), want));                // n = 1
        EXPECT_TRUE(test::close(v.unsqueeze(0).mm(a.t()), want));
        // addmm on a column: beta * self + alpha * A v, and beta = 0 over NaNs.
        if (is_floating_point(dt)) {
          Tensor self = test::sample_tensor({n, 1}, dt, 124);
          const std::vector<double> sv = values(self);
          std::vector<double> w2(want.size());
          for (size_t i = 0; i < w2.size(); ++i) w2[i] = stored(dt, 0.5 * sv[i] + 2 * want[i]);
          EXPECT_TRUE(test::close(self.addmm(a, v.unsqueeze(1), 0.5, 2), w2));
          Tensor nan = Tensor::full({1, n}, std::numeric_limits<double>::quiet_NaN(), dt);
          EXPECT_TRUE(test::close(nan.addmm(v.unsqueeze(0), a.t(), 0, 1), want));
        }
      }
    }
  }
}

// ---- matmul: 1-D and batched ---------------------------------------------------------

TEST(Linalg, MatmulOneDimensional) {
  for (DType dt : test::numeric_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor v = test::sample_tensor({4}, dt, 31);
    Tensor w = test::sample_tensor({4}, dt, 32);
    Tensor mat = test::sample_tensor({4, 3}, dt, 33);
    Tensor mat2 = test::sample_tensor({3, 4}, dt, 34);

    Tensor d = v.matmul(w);
    EXPECT_EQ(d.dim(), 0);
    EXPECT_TRUE(test::close(d, stored(dt, ref_matmul(values(v), {1, 4}, values(w), {4, 1}, {}))));

    Tensor vm = v.matmul(mat);
    EXPECT_EQ(vm.shape(), (Shape{3}));
    EXPECT_TRUE(test::close(vm, stored(dt, ref_matmul(values(v), {1, 4}, values(mat), {4, 3}, {}))));

    Tensor mv = mat2.matmul(v);
    EXPECT_EQ(mv.shape(), (Shape{3}));
    EXPECT_TRUE(test::close(mv, stored(dt, ref_matmul(values(mat2), {3, 4}, values(v), {4, 1}, {}))));
  }
}

TEST(Linalg, MatmulBatchedBroadcast) {
  for (DType dt : test::numeric_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = test::sample_tensor({2, 1, 3, 4}, dt, 41);
    Tensor b = test::sample_tensor({5, 4, 2}, dt, 42);
    Tensor c = a.matmul(b);
    EXPECT_EQ(c.shape(), (Shape{2, 5, 3, 2}));
    EXPECT_TRUE(test::close(
        c, stored(dt, ref_matmul(values(a), a.shape(), values(b), b.shape(), {2, 5}))));

    // 2-D first operand broadcast over the second's batch.
    Tensor m = test::sample_tensor({3, 4}, dt, 43);
    Tensor bb = test::sample_tensor({2, 4, 5}, dt, 44);
    EXPECT_TRUE(test::close(m.matmul(bb), stored(dt, ref_matmul(values(m), m.shape(), values(bb),
                                                                 bb.shape(), {2}))));
    // 1-D on either side of a batched operand.
    Tensor v = test::sample_tensor({4}, dt, 45);
    Tensor r1 = a.matmul(v);
    EXPECT_EQ(r1.shape(), (Shape{2, 1, 3}));
    EXPECT_TRUE(test::close(
        r1, stored(dt, ref_matmul(values(a), a.shape(), values(v), {4, 1}, {2, 1}))));
    Tensor r2 = v.matmul(b);
    EXPECT_EQ(r2.shape(), (Shape{5, 2}));
    EXPECT_TRUE(test::close(
        r2, stored(dt, ref_matmul(values(v), {1, 4}, values(b), b.shape(), {5}))));
  }
}

TEST(Linalg, MatmulBatchedWithMatrixFoldsOrNot) {
  for (DType dt : {kFloat32, kFloat64, kInt8, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor b = test::sample_tensor({4, 5}, dt, 51);
    // Contiguous batch: folds into one [6, 4] @ [4, 5].
    Tensor a = test::sample_tensor({2, 3, 4}, dt, 52);
    EXPECT_TRUE(test::close(a.matmul(b), stored(dt, ref_matmul(values(a), a.shape(), values(b),
                                                                b.shape(), {2}))));
    // Batch and row dims swapped: does not fold, takes the batched path.
    Tensor at = test::sample_tensor({3, 2, 4}, dt, 53).transpose(0, 1);
    Tensor r = at.matmul(b);
    EXPECT_EQ(r.shape(), (Shape{2, 3, 5}));
    EXPECT_TRUE(test::close(
        r, stored(dt, ref_matmul(values(at), at.shape(), values(b), b.shape(), {2}))));
    // Expanded batch of one matrix.
    Tensor ae = test::sample_tensor({1, 3, 4}, dt, 54).expand({3, 3, 4});
    EXPECT_TRUE(test::close(ae.matmul(b), stored(dt, ref_matmul(values(ae), ae.shape(),
                                                                 values(b), b.shape(), {3}))));
  }
}

TEST(Linalg, BatchedTransposedAndSlicedOperands) {
  for (DType dt : test::numeric_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = test::sample_tensor({3, 4, 2}, dt, 61).transpose(1, 2);  // [3, 2, 4] col-major
    Tensor b = test::sample_tensor({3, 5, 8}, dt, 62).slice(2, 0, 8, 2);  // [3, 5, 4]
    b = b.transpose(1, 2);                                                // [3, 4, 5]
    Tensor c = a.bmm(b);
    EXPECT_EQ(c.shape(), (Shape{3, 2, 5}));
    EXPECT_TRUE(test::close(
        c, stored(dt, ref_matmul(values(a), a.shape(), values(b), b.shape(), {3}))));
    EXPECT_TRUE(test::close(a.matmul(b), values(c)));
  }
}

TEST(Linalg, BmmManySmallAndFewLargeBatches) {
  for (DType dt : {kFloat32, kFloat64, kInt32}) {
    SCOPED_TRACE(dtype_name(dt));
    // Many small GEMMs: spread over the thread pool.
    Tensor a = test::sample_tensor({200, 6, 7}, dt, 71);
    Tensor b = test::sample_tensor({200, 7, 5}, dt, 72);
    EXPECT_TRUE(test::close(a.bmm(b), stored(dt, ref_matmul(values(a), a.shape(), values(b),
                                                              b.shape(), {200}))));
    // GEMMs big enough for BLAS's own threads: one after another.
    Tensor c = test::sample_tensor({2, 70, 80}, dt, 73);
    Tensor d = test::sample_tensor({2, 80, 60}, dt, 74);
    EXPECT_TRUE(test::close(c.bmm(d), stored(dt, ref_matmul(values(c), c.shape(), values(d),
                                                             d.shape(), {2}))));
  }
}

// ---- empty tensors and zero-size dims ---------------------------------------------

TEST(Linalg, ZeroSizeDims) {
  for (DType dt : test::numeric_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    // k = 0: a sum of no products is 0.
    Tensor z = Tensor::empty({3, 0}, dt).mm(Tensor::empty({0, 4}, dt));
    EXPECT_EQ(z.shape(), (Shape{3, 4}));
    EXPECT_EQ(values(z), std::vector<double>(12, 0.0));
    Tensor zb = Tensor::empty({2, 3, 0}, dt).matmul(Tensor::empty({0, 2}, dt));
    EXPECT_EQ(zb.shape(), (Shape{2, 3, 2}));
    EXPECT_EQ(values(zb), std::vector<double>(12, 0.0));
    EXPECT_EQ(values(Tensor::empty({0}, dt).dot(Tensor::empty({0}, dt))), (std::vector<double>{0}));
    EXPECT_EQ(values(Tensor::empty({0}, dt).matmul(Tensor::empty({0}, dt))),
              (std::vector<double>{0}));
    // n = 0, m = 0, batch = 0: empty results of the right shape.
    EXPECT_EQ(Tensor::empty({0, 3}, dt).mm(test::sample_tensor({3, 4}, dt)).shape(), (Shape{0, 4}));
    EXPECT_EQ(test::sample_tensor({2, 3}, dt).mm(Tensor::empty({3, 0}, dt)).shape(), (Shape{2, 0}));
    EXPECT_EQ(Tensor::empty({0, 2, 3}, dt).bmm(Tensor::empty({0, 3, 4}, dt)).shape(),
              (Shape{0, 2, 4}));
    EXPECT_EQ(Tensor::empty({0, 1, 2, 3}, dt).matmul(Tensor::empty({5, 3, 4}, dt)).shape(),
              (Shape{0, 5, 2, 4}));
    EXPECT_EQ(Tensor::empty({0}, dt).outer(test::sample_tensor({3}, dt)).shape(), (Shape{0, 3}));
  }
}

// ---- addmm ------------------------------------------------------------------------

TEST(Linalg, AddmmBetaAlpha) {
  for (DType dt : test::numeric_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    const bool fl = is_floating_point(dt);
    const Scalar beta = fl ? Scalar(0.5) : Scalar(2);
    const Scalar alpha = fl ? Scalar(2.0) : Scalar(3);
    Tensor m1 = test::sample_tensor({3, 4}, dt, 81);
    Tensor m2 = test::sample_tensor({4, 5}, dt, 82).t().contiguous().t();
    const std::vector<double> prod = ref_mm(m1, m2);
    for (const Shape& self_shape : {Shape{3, 5}, Shape{5}, Shape{1, 5}, Shape{3, 1}, Shape{}}) {
      SCOPED_TRACE(shape_str(self_shape));
      Tensor self = test::sample_tensor(self_shape, dt, 83);
      const std::vector<double> sv = values(self.expand({3, 5}));
      std::vector<double> want(prod.size());
      for (size_t i = 0; i < want.size(); ++i) {
        want[i] = stored(dt, beta.to_double() * sv[i] + alpha.to_double() * prod[i]);
      }
      Tensor r = self.addmm(m1, m2, beta, alpha);
      EXPECT_EQ(r.shape(), (Shape{3, 5}));
      EXPECT_TRUE(test::close(r, want));
      EXPECT_EQ(values(self.expand({3, 5})), sv);  // self untouched
    }
    // Defaults: self + m1 @ m2.
    Tensor self = test::sample_tensor({3, 5}, dt, 84);
    std::vector<double> want = values(self);
    for (size_t i = 0; i < want.size(); ++i) want[i] = stored(dt, want[i] + prod[i]);
    EXPECT_TRUE(test::close(self.addmm(m1, m2), want));
  }
}

TEST(Linalg, AddmmBetaZeroIgnoresSelf) {
  for (DType dt : test::float_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor self = Tensor::full({2, 3}, std::numeric_limits<double>::quiet_NaN(), dt);
    Tensor m1 = test::sample_tensor({2, 4}, dt, 91);
    Tensor m2 = test::sample_tensor({4, 3}, dt, 92);
    std::vector<double> want = ref_mm(m1, m2);
    for (double& x : want) x = stored(dt, 0.5 * x);
    EXPECT_TRUE(test::close(self.addmm(m1, m2, 0, 0.5), want));
    EXPECT_TRUE(test::close(self.addmm(m1, m2, 0.0, 0.5), want));
    // With beta != 0 the NaNs come through.
    for (double x : values(self.addmm(m1, m2, 1, 1))) EXPECT_TRUE(std::isnan(x));
    // k = 0: beta * self, alpha irrelevant.
    Tensor s2 = test::sample_tensor({2, 3}, dt, 93);
    std::vector<double> want2 = values(s2);
    for (double& x : want2) x = stored(dt, 2 * x);
    EXPECT_TRUE(test::close(s2.addmm(Tensor::empty({2, 0}, dt), Tensor::empty({0, 3}, dt), 2, 7),
                            want2));
    EXPECT_EQ(values(self.addmm(Tensor::empty({2, 0}, dt), Tensor::empty({0, 3}, dt), 0, 1)),
              std::vector<double>(6, 0.0));
  }
}

// ---- integer overflow wraps -------------------------------------------------------

TEST(Linalg, IntegerOverflowWraps) {
  Tensor a8 = test::make({1, 2}, kInt8, {100, 100});
  Tensor b8 = test::make({2, 1}, kInt8, {100, 100});
  EXPECT_EQ(values(a8.mm(b8)), (std::vector<double>{stored(kInt8, 20000)}));  // 32
  EXPECT_EQ(values(a8.matmul(b8)), (std::vector<double>{32}));
  Tensor u8 = test::make({1, 3}, kUInt8, {200, 200, 1});
  Tensor v8 = test::make({3, 1}, kUInt8, {2, 1, 7});
  EXPECT_EQ(values(u8.mm(v8)), (std::vector<double>{stored(kUInt8, 607)}));  // 95
  Tensor a32 = test::make({1, 2}, kInt32, {65536, -65536});
  Tensor b32 = test::make({2, 1}, kInt32, {65536, 3});
  EXPECT_EQ(values(a32.mm(b32)), (std::vector<double>{-196608}));  // 2^32 wraps to 0
  // int64: 2^62 * 4 = 2^64 wraps to 0, plus -5.
  Tensor a64 = Tensor::from_vector<int64_t>({int64_t{1} << 62, -5}, {1, 2});
  Tensor b64 = Tensor::from_vector<int64_t>({4, 1}, {2, 1});
  EXPECT_EQ(a64.mm(b64).item<int64_t>(), -5);
  EXPECT_EQ(a64.reshape({2}).dot(b64.reshape({2})).item<int64_t>(), -5);
  EXPECT_EQ(values(a8.reshape({2}).outer(b8.reshape({2}))),
            (std::vector<double>(4, stored(kInt8, 10000))));
}

// ---- dot ----------------------------------------------------------------------------

TEST(Linalg, DotEveryDtype) {
  for (DType dt : test::numeric_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = test::sample_tensor({9}, dt, 101);
    Tensor b = test::sample_tensor({9}, dt, 102);
    auto ref = [&](const Tensor& x, const Tensor& y) {
      const std::vector<double> xv = values(x), yv = values(y);
      double s = 0;
      for (size_t i = 0; i < xv.size(); ++i) s += xv[i] * yv[i];
      return std::vector<double>{stored(dt, s)};
    };
    Tensor d = a.dot(b);
    EXPECT_EQ(d.dim(), 0);
    EXPECT_EQ(d.dtype(), dt);
    EXPECT_TRUE(test::close(d, ref(a, b)));
    // Strided, and expanded (stride 0).
    Tensor s = test::sample_tensor({18}, dt, 103).slice(0, 1, 18, 2);
    EXPECT_TRUE(test::close(s.dot(b), ref(s, b)));
    Tensor e = test::sample_tensor({1}, dt, 104).expand({9});
    EXPECT_TRUE(test::close(a.dot(e), ref(a, e)));
    Tensor one = test::sample_tensor({3, 3}, dt, 105).select(1, 2);  // [3], stride 3
    EXPECT_TRUE(test::close(one.slice(0, 0, 1).dot(a.slice(0, 4, 5)),
                            ref(one.slice(0, 0, 1), a.slice(0, 4, 5))));
  }
}

TEST(Linalg, DotAccumulatesAccurately) {
  // 1 + many tiny terms: float32 accumulation would drop every tiny term.
  const int64_t n = 100001;
  std::vector<double> av(n, 1e-4), bv(n, 1e-4);
  av[0] = 1;
  bv[0] = 1;
  Tensor a = test::make({n}, kFloat32, av);
  Tensor b = test::make({n}, kFloat32, bv);
  double want = 1;
  for (int64_t i = 1; i < n; ++i) want += static_cast<double>(1e-4f) * static_cast<double>(1e-4f);
  EXPECT_NEAR(a.dot(b).item<double>(), want, 1e-6);
}

// ---- outer --------------------------------------------------------------------------

TEST(Linalg, OuterEveryDtype) {
  for (DType dt : test::all_dtypes()) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = test::sample_tensor({4}, dt, 111);
    Tensor b = test::sample_tensor({10}, dt, 112).slice(0, 0, 10, 2);  // [5], stride 2
    Tensor o = a.outer(b);
    EXPECT_EQ(o.shape(), (Shape{4, 5}));
    EXPECT_EQ(o.dtype(), dt);
    const std::vector<double> av = values(a), bv = values(b);
    std::vector<double> want;
    for (double x : av)
      for (double y : bv) want.push_back(stored(dt, x * y));
    EXPECT_TRUE(test::close(o, want));
    Tensor ae = test::sample_tensor({1}, dt, 113).expand({3});
    EXPECT_TRUE(test::close(ae.outer(a), stored(dt, ref_matmul(values(ae), {3, 1}, av, {1, 4}, {}))));
  }
}

TEST(Linalg, OuterPromotes) {
  Tensor a = test::make({2}, kInt32, {2, 3});
  Tensor b = test::make({3}, kFloat32, {0.5, 1.5, -2});
  Tensor o = a.outer(b);
  EXPECT_EQ(o.dtype(), kFloat32);
  EXPECT_EQ(values(o), (std::vector<double>{1, 3, -4, 1.5, 4.5, -6}));
}

// ---- errors -------------------------------------------------------------------------

TEST(Linalg, Errors) {
  Tensor a = test::sample_tensor({2, 3}, kFloat32);
  Tensor b = test::sample_tensor({4, 5}, kFloat32);
  THD_EXPECT_THROW_MSG(a.mm(b), ShapeError, "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
  THD_EXPECT_THROW_MSG(a.matmul(b), ShapeError, "shapes [2, 3] and [4, 5] cannot be multiplied");
  THD_EXPECT_THROW_MSG(a.mm(test::sample_tensor({3, 4}, kFloat64)), TypeError,
                       "expected m1 and m2 to have the same dtype, but got: float32 != float64");
  THD_EXPECT_THROW_MSG(a.matmul(test::sample_tensor({3}, kInt64)), TypeError, "same dtype");
  THD_EXPECT_THROW_MSG(test::sample_tensor({2, 2}, kBool).mm(test::sample_tensor({2, 2}, kBool)),
                       TypeError, "bool");
  THD_EXPECT_THROW_MSG(test::sample_tensor({3}, kBool).dot(test::sample_tensor({3}, kBool)),
                       TypeError, "bool");
  THD_EXPECT_THROW_MSG(a.mm(test::sample_tensor({3}, kFloat32)), ShapeError, "2-D");
  THD_EXPECT_THROW_MSG(a.matmul(Tensor::ones({}, kFloat32)), ShapeError, "at least 1D");
  THD_EXPECT_THROW_MSG(a.matmul(test::sample_tensor({4}, kFloat32)), ShapeError, "[2, 3] and [4]");
  THD_EXPECT_THROW_MSG(test::sample_tensor({3}, kFloat32).matmul(test::sample_tensor({4}, kFloat32)),
                       ShapeError, "[3] and [4]");
  THD_EXPECT_THROW_MSG(
      test::sample_tensor({2, 2, 3}, kFloat32).matmul(test::sample_tensor({3, 3, 1}, kFloat32)),
      ShapeError, "do not broadcast");
  THD_EXPECT_THROW_MSG(Tensor().matmul(a), ValueError, "undefined");
  THD_EXPECT_THROW_MSG(matmul(a, Tensor()), ValueError, "undefined");

  Tensor x = test::sample_tensor({2, 2, 3}, kFloat32);
  THD_EXPECT_THROW_MSG(x.bmm(test::sample_tensor({3, 3, 4}, kFloat32)), ShapeError,
                       "([2, 2, 3] and [3, 3, 4])");
  THD_EXPECT_THROW_MSG(x.bmm(test::sample_tensor({2, 4, 4}, kFloat32)), ShapeError,
                       "cannot be multiplied");
  THD_EXPECT_THROW_MSG(a.bmm(a), ShapeError, "3-D");

  Tensor self = test::sample_tensor({2, 5}, kFloat32);
  THD_EXPECT_THROW_MSG(self.addmm(a, b), ShapeError, "(2x3 and 4x5)");
  THD_EXPECT_THROW_MSG(test::sample_tensor({3}, kFloat32).addmm(a, test::sample_tensor({3, 5}, kFloat32)),
                       ShapeError, "self of shape [3] does not broadcast to the result's shape [2, 5]");
  THD_EXPECT_THROW_MSG(self.to(kFloat64).addmm(a, test::sample_tensor({3, 5}, kFloat32)), TypeError,
                       "same dtype");
  Tensor ia = test::sample_tensor({2, 3}, kInt32), ib = test::sample_tensor({3, 5}, kInt32);
  THD_EXPECT_THROW_MSG(self.to(kInt32).addmm(ia, ib, 0.5, 1), TypeError, "must not be floating");

  THD_EXPECT_THROW_MSG(a.dot(a), ShapeError, "1D tensors expected");
  THD_EXPECT_THROW_MSG(test::sample_tensor({3}, kFloat32).dot(test::sample_tensor({4}, kFloat32)),
                       ShapeError, "[3] and [4]");
  THD_EXPECT_THROW_MSG(test::sample_tensor({3}, kFloat32).dot(test::sample_tensor({3}, kFloat64)),
                       TypeError, "float32 != float64");
  THD_EXPECT_THROW_MSG(a.outer(test::sample_tensor({3}, kFloat32)), ShapeError, "1-D");
}

}  // namespace
}  // namespace thd
