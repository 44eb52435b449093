#include <gtest/gtest.h>
#include <thd/tensor.h>

#include "tensor/reference.h"

namespace thd {
namespace {

using test::values;

using test::numel_of;
using test::ravel;
using test::unravel;

// cat computed element by element: output[.., j, ..] comes from the input whose slot
// along dim holds j. Inputs of shape [0] are skipped, as in torch.
std::vector<double> cat_reference(const std::vector<Tensor>& ts, int64_t dim, Shape* shape_out) {
  std::vector<const Tensor*> used;
  for (const Tensor& t : ts) {
    if (!(t.dim() == 1 && t.numel() == 0)) used.push_back(&t);
  }
  Shape shape = used[0]->shape();
  shape[dim] = 0;
  for (const Tensor* t : used) shape[dim] += t->size(dim);
  std::vector<std::vector<double>> in;
  for (const Tensor* t : used) in.push_back(values(*t));
  std::vector<double> out(static_cast<size_t>(numel_of(shape)));
  for (int64_t i = 0; i < numel_of(shape); ++i) {
    auto idx = unravel(i, shape);
    size_t k = 0;
    while (idx[dim] >= used[k]->size(dim)) idx[dim] -= used[k++]->size(dim);
    out[i] = in[k][ravel(idx, used[k]->shape())];
  }
  *shape_out = shape;
  return out;
}

TEST(Cat, EveryDTypeEveryDim) {
  for (DType dt : test::all_dtypes()) {
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      Shape a{2, 3, 4}, b{2, 3, 4}, c{2, 3, 4};
      const int64_t d = dim < 0 ? dim + 3 : dim;
      b[d] = 1;
      c[d] = 3;
      std::vector<Tensor> ts = {test::sample_tensor(a, dt, 1), test::sample_tensor(b, dt, 2),
                                test::sample_tensor(c, dt, 3)};
      Shape want;
      auto expected = cat_reference(ts, d, &want);
      Tensor out = cat(ts, dim);
      EXPECT_EQ(out.dtype(), dt);
      EXPECT_EQ(out.shape(), want) << dt << " dim " << dim;
      EXPECT_TRUE(out.is_contiguous());
      EXPECT_EQ(values(out), expected) << dt << " dim " << dim;
    }
  }
}

TEST(Cat, PromotesDTypes) {
  struct Case {
    DType a, b, want;
  };
  for (Case c : {Case{kInt32, kFloat32, kFloat32}, Case{kUInt8, kInt8, kInt32},
                 Case{kBool, kInt64, kInt64}, Case{kFloat16, kBFloat16, kFloat32},
                 Case{kInt64, kFloat16, kFloat16}, Case{kBool, kBool, kBool}}) {
    Tensor a = test::sample_tensor({2, 2}, c.a, 4);
    Tensor b = test::sample_tensor({1, 2}, c.b, 5);
    Tensor out = cat({a, b});
    EXPECT_EQ(out.dtype(), c.want) << c.a << " + " << c.b;
    std::vector<double> want = values(a);
    for (double v : values(b)) want.push_back(v);
    EXPECT_EQ(values(out), want);
  }
  // Promotion happens across the whole list, not pairwise with the first.
  Tensor out = cat({Tensor::ones({1}, kBool), Tensor::ones({1}, kUInt8), Tensor::ones({1}, kInt8)});
  EXPECT_EQ(out.dtype(), kInt32);
}

TEST(Cat, NonContiguousInputs) {
  Tensor base = test::sample_tensor({4, 6}, kFloat32, 7);
  Tensor t = base.t();                                                   // [6, 4], transposed
  Tensor s = base.slice(1, 0, 6, 2).t();                                 // [3, 4], strided
  Tensor e = test::make({1, 4}, kFloat32, {1, 2, 3, 4}).expand({2, 4});  // stride 0
  std::vector<Tensor> ts = {t, s, e};
  Shape want;
  auto expected = cat_reference(ts, 0, &want);
  Tensor out = cat(ts, 0);
  EXPECT_EQ(out.shape(), (Shape{11, 4}));
  EXPECT_EQ(values(out), expected);
  // Along a non-leading dim the output slots are themselves strided views.
  std::vector<Tensor> ts2 = {t.t(), s.t(), e.t()};
  auto expected2 = cat_reference(ts2, 1, &want);
  Tensor out2 = cat(ts2, -1);
  EXPECT_EQ(out2.shape(), (Shape{4, 11}));
  EXPECT_EQ(values(out2), expected2);
}

TEST(Cat, ZeroSizeDimsAndLegacyEmpty) {
  Tensor a = test::sample_tensor({2, 3}, kInt64, 1);
  Tensor z = Tensor::empty({0, 3}, kInt64);
  EXPECT_EQ(values(cat({z, a, z})), values(a));
  EXPECT_EQ(cat({z, z}).shape(), (Shape{0, 3}));
  Tensor out = cat({Tensor::empty({2, 0}, kInt64), a}, 1);
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(out), values(a));
  // A 1-D empty tensor is skipped whatever the other shapes, but still promotes.
  Tensor legacy = Tensor::empty({0}, kFloat64);
  Tensor l = cat({legacy, a, legacy}, 1);
  EXPECT_EQ(l.shape(), (Shape{2, 3}));
  EXPECT_EQ(l.dtype(), kFloat64);
  EXPECT_EQ(values(l), values(a));
  Tensor only = cat({legacy, Tensor::empty({0}, kInt32)});
  EXPECT_EQ(only.shape(), (Shape{0}));
  EXPECT_EQ(only.dtype(), kFloat64);
  // A [2, 0] tensor is not 1-D: it must match the others.
  THD_EXPECT_THROW_MSG(cat({Tensor::empty({2, 0}, kInt64), a}, 0), ShapeError, "dimension 0");
}

TEST(Cat, SingleTensorIsACopy) {
  Tensor a = test::sample_tensor({3, 2}, kFloat32, 3);
  Tensor out = cat({a});
  EXPECT_FALSE(out.shares_storage(a));
  EXPECT_EQ(values(out), values(a));
}

TEST(Cat, ManySmallPiecesAndLargePieces) {
  // Enough small pieces to take the threaded path, and two pieces large enough to
  // make copy_ itself parallel.
  std::vector<Tensor> small;
  for (uint32_t i = 0; i < 300; ++i) small.push_back(test::sample_tensor({5, 40}, kInt32, i));
  for (int64_t dim : {0, 1}) {
    Shape want;
    auto expected = cat_reference(small, dim, &want);
    Tensor out = cat(small, dim);
    EXPECT_EQ(out.shape(), want);
    EXPECT_EQ(values(out), expected);
  }
  std::vector<Tensor> big = {test::sample_tensor({300, 200}, kFloat64, 1),
                             test::sample_tensor({300, 100}, kFloat32, 2).t().contiguous().t()};
  Shape want;
  auto expected = cat_reference(big, 1, &want);
  EXPECT_EQ(values(cat(big, 1)), expected);
}

TEST(Cat, Errors) {
  Tensor a = Tensor::zeros({2, 3});
  THD_EXPECT_THROW_MSG(cat({}), ValueError, "non-empty list");
  THD_EXPECT_THROW_MSG(cat({a, Tensor()}), ValueError, "tensor 1 of the list is undefined");
  THD_EXPECT_THROW_MSG(cat({a, Tensor::zeros({})}), ShapeError,
                       "zero-dimensional tensor (at position 1)");
  THD_EXPECT_THROW_MSG(cat({a, Tensor::zeros({2, 3, 1})}), ShapeError, "same number of dimensions");
  // Names the offending tensor, both shapes and the dim.
  try {
    cat({a, a, Tensor::zeros({2, 4})}, 0);
    ADD_FAILURE() << "expected ShapeError";
  } catch (const ShapeError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("tensor number 2"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 4]"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("except in dimension 0"), std::string::npos) << m;
    EXPECT_NE(m.find("cat"), std::string::npos) << m;
  }
  THD_EXPECT_THROW_MSG(cat({a, a}, 2), IndexError, "out of range");
  THD_EXPECT_THROW_MSG(cat({a, a}, -3), IndexError, "out of range");
}

TEST(Stack, EveryDTypeEveryDim) {
  for (DType dt : test::all_dtypes()) {
    std::vector<Tensor> ts = {test::sample_tensor({2, 3}, dt, 1),
                              test::sample_tensor({2, 3}, dt, 2),
                              test::sample_tensor({2, 3}, dt, 3)};
    std::vector<std::vector<double>> in;
    for (const Tensor& t : ts) in.push_back(values(t));
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      Shape want{2, 3};
      want.insert(want.begin() + d, 3);
      std::vector<double> expected;
      for (int64_t i = 0; i < numel_of(want); ++i) {
        auto idx = unravel(i, want);
        const int64_t k = idx[d];
        idx.erase(idx.begin() + d);
        expected.push_back(in[k][ravel(idx, {2, 3})]);
      }
      Tensor out = stack(ts, dim);
      EXPECT_EQ(out.dtype(), dt);
      EXPECT_EQ(out.shape(), want);
      EXPECT_EQ(values(out), expected) << dt << " dim " << dim;
    }
  }
}

TEST(Stack, ScalarsNonContiguousAndPromotion) {
  Tensor s = stack({Tensor::full({}, 1, kInt32), Tensor::full({}, 2.5, kFloat64)});
  EXPECT_EQ(s.shape(), (Shape{2}));
  EXPECT_EQ(s.dtype(), kFloat64);
  EXPECT_EQ(values(s), (std::vector<double>{1, 2.5}));
  Tensor base = test::sample_tensor({3, 4}, kInt8, 9);
  Tensor t = base.t();  // [4, 3]
  Tensor e = test::make({1, 3}, kInt8, {7, 8, 9}).expand({4, 3});
  Tensor out = stack({t, e}, 1);
  EXPECT_EQ(out.shape(), (Shape{4, 2, 3}));
  std::vector<double> vt = values(t), ve = values(e), expected;
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 3; ++j) expected.push_back(vt[i * 3 + j]);
    for (int64_t j = 0; j < 3; ++j) expected.push_back(ve[i * 3 + j]);
  }
  EXPECT_EQ(values(out), expected);
  EXPECT_EQ(stack({Tensor::empty({0, 2}), Tensor::empty({0, 2})}, 1).shape(), (Shape{0, 2, 2}));
  // Large enough for the threaded path.
  std::vector<Tensor> many;
  for (uint32_t i = 0; i < 500; ++i) many.push_back(test::sample_tensor({100}, kFloat32, i));
  Tensor m = stack(many, 1);
  EXPECT_EQ(m.shape(), (Shape{100, 500}));
  std::vector<double> mv = values(m);
  for (int64_t i = 0; i < 500; i += 37) {
    std::vector<double> col = values(many[i]);
    for (int64_t j = 0; j < 100; ++j) ASSERT_EQ(mv[j * 500 + i], col[j]);
  }
}

TEST(Stack, Errors) {
  Tensor a = Tensor::zeros({2, 3});
  THD_EXPECT_THROW_MSG(stack({}), ValueError, "non-empty list");
  THD_EXPECT_THROW_MSG(stack({a, a, Tensor::zeros({3, 2})}), ShapeError,
                       "got [2, 3] at entry 0 and [3, 2] at entry 2");
  THD_EXPECT_THROW_MSG(stack({a, a}, 3), IndexError, "out of range");
  THD_EXPECT_THROW_MSG(stack({a, a}, -4), IndexError, "out of range");
  THD_EXPECT_THROW_MSG(stack({a, Tensor()}), ValueError, "undefined");
}

}  // namespace
}  // namespace thd
