// CUDA reductions against the CPU's, for every dtype, dim set and layout the kernels
// read differently: contiguous rows (the reduced dim innermost), columns (a kept dim
// innermost), several kept or reduced dims, strided, transposed, expanded and
// permuted views that fall back to a contiguous copy.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <thd/tensor.h>

#include "cuda_test_util.h"

namespace thd::testing {
namespace {

using Fn = std::function<Tensor(const Tensor&)>;

constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = {kBool,    kUInt8,    kInt8,    kInt32,  kInt64,
                                       kFloat16, kBFloat16, kFloat32, kFloat64};
  return v;
}
const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> v = {kFloat16, kBFloat16, kFloat32, kFloat64};
  return v;
}

// Integer values in [-50, 50) ([0, 100) for uint8, 0/1 for bool) in any dtype: their
// sums and means are exact in both devices' accumulators, so every result must match
// the CPU's exactly, and a dropped or doubled element shows.
Tensor exact_values(const Shape& shape, DType dtype) {
  if (!is_floating_point(dtype)) return random_cpu(shape, dtype);
  return random_cpu(shape, kInt64).to(dtype);
}

// f on the CPU input and on a CUDA copy of it; `f` may take views first.
void expect_same(const Tensor& cpu_in, const Fn& f, const std::string& what, double rtol = 0,
                 double atol = 0) {
  SCOPED_TRACE(what);
  const Tensor want = f(cpu_in);
  const Tensor got = f(cpu_in.cuda());
  expect_matches_cpu(got, want, rtol, atol);
}

std::string label(const char* op, DType dt, const Shape& shape, const Dims& dims, bool keepdim) {
  return std::string(op) + " " + std::string(dtype_name(dt)) + " shape " + shape_str(shape) +
         " dims " + shape_str(dims) + (keepdim ? " keepdim" : "");
}

// Reduced-dim lengths that give each row launch shape (one thread, a warp slice, a
// warp, a block per output) and each column shape, with odd sizes throughout.
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> v = {{3, 4, 5}, {7, 1, 33}, {2, 130, 3}, {5, 3, 2049},
                                       {1025, 3, 7}};
  return v;
}

const std::vector<Dims>& dim_sets() {
  static const std::vector<Dims> v = {{},     {0},     {1},       {2},   {-1},
                                      {0, 2}, {-1, 1}, {0, 1, 2}, {2, 0}};
  return v;
}

TEST(CudaReduce, SumMeanMaxMinAnyAllEveryDtypeShapeAndDims) {
  THD_REQUIRE_CUDA();
  for (DType dt : all_dtypes()) {
    for (const Shape& shape : shapes()) {
      const Tensor t = exact_values(shape, dt);
      for (const Dims& dims : dim_sets()) {
        for (bool keepdim : {false, true}) {
          expect_same(t, [&](const Tensor& x) { return x.sum(dims, keepdim); },
                      label("sum", dt, shape, dims, keepdim));
          expect_same(t, [&](const Tensor& x) { return x.max(dims, keepdim); },
                      label("max", dt, shape, dims, keepdim));
          expect_same(t, [&](const Tensor& x) { return x.min(dims, keepdim); },
                      label("min", dt, shape, dims, keepdim));
          expect_same(t, [&](const Tensor& x) { return x.any(dims, keepdim); },
                      label("any", dt, shape, dims, keepdim));
          expect_same(t, [&](const Tensor& x) { return x.all(dims, keepdim); },
                      label("all", dt, shape, dims, keepdim));
          if (is_floating_point(dt)) {
            expect_same(t, [&](const Tensor& x) { return x.mean(dims, keepdim); },
                        label("mean", dt, shape, dims, keepdim));
          }
        }
      }
      expect_same(t, [](const Tensor& x) { return x.sum(); }, label("sum()", dt, shape, {}, false));
      expect_same(t, [](const Tensor& x) { return x.max(); }, label("max()", dt, shape, {}, false));
      expect_same(t, [](const Tensor& x) { return x.all(); }, label("all()", dt, shape, {}, false));
    }
  }
}

TEST(CudaReduce, ProdEveryDtype) {
  THD_REQUIRE_CUDA();
  for (DType dt : all_dtypes()) {
    // Integers wrap in int64 in any order; floats (normal values, never 0) multiply
    // in double, so only the last rounding may differ.
    const double rtol = is_floating_point(dt) ? tolerance_for(dt).first : 0;
    for (const Shape& shape : {Shape{3, 4, 5}, Shape{2, 130, 3}, Shape{9, 3, 301}}) {
      const Tensor t = random_cpu(shape, dt);
      for (const Dims& dims : dim_sets()) {
        expect_same(t, [&](const Tensor& x) { return x.prod(dims); },
                    label("prod", dt, shape, dims, false), rtol);
      }
      expect_same(t, [](const Tensor& x) { return x.prod(); }, label("prod()", dt, shape, {}, false),
                  rtol);
    }
  }
}

// Positions of the first extreme; integer inputs in [-50, 50) tie often.
TEST(CudaReduce, ArgmaxArgminEveryDtypeAndDim) {
  THD_REQUIRE_CUDA();
  for (DType dt : all_dtypes()) {
    if (dt == kBool) continue;  // not defined for bool, as on the CPU
    for (const Shape& shape : shapes()) {
      const Tensor t = exact_values(shape, dt);
      for (int64_t dim = -1; dim < 3; ++dim) {
        for (bool keepdim : {false, true}) {
          expect_same(t, [&](const Tensor& x) { return x.argmax(dim, keepdim); },
                      label("argmax", dt, shape, {dim}, keepdim));
          expect_same(t, [&](const Tensor& x) { return x.argmin(dim, keepdim); },
                      label("argmin", dt, shape, {dim}, keepdim));
        }
      }
      expect_same(t, [](const Tensor& x) { return x.argmax(); }, label("argmax()", dt, shape, {}, false));
      expect_same(t, [](const Tensor& x) { return x.argmin(); }, label("argmin()", dt, shape, {}, false));
    }
  }
}

TEST(CudaReduce, VarStdNormEveryFloatDtype) {
  THD_REQUIRE_CUDA();
  for (DType dt : float_dtypes()) {
    const auto [rtol, atol] = tolerance_for(dt);
    for (const Shape& shape : shapes()) {
      const Tensor t = random_cpu(shape, dt);
      for (const Dims& dims : dim_sets()) {
        for (bool keepdim : {false, true}) {
          for (int64_t correction : {0, 1, 2}) {
            expect_same(t, [&](const Tensor& x) { return x.var(dims, correction, keepdim); },
                        label("var", dt, shape, dims, keepdim), rtol, atol);
            expect_same(t, [&](const Tensor& x) { return x.std(dims, correction, keepdim); },
                        label("std", dt, shape, dims, keepdim), rtol, atol);
          }
          for (double p : {2.0, 1.0, 0.0, 3.0, 0.5, kInf, -kInf}) {
            expect_same(t, [&](const Tensor& x) { return x.norm(p, dims, keepdim); },
                        label(("norm p=" + std::to_string(p)).c_str(), dt, shape, dims, keepdim),
                        rtol, atol);
          }
        }
      }
      expect_same(t, [](const Tensor& x) { return x.var(); }, label("var()", dt, shape, {}, false),
                  rtol, atol);
      expect_same(t, [](const Tensor& x) { return x.std(); }, label("std()", dt, shape, {}, false),
                  rtol, atol);
      expect_same(t, [](const Tensor& x) { return x.norm(); }, label("norm()", dt, shape, {}, false),
                  rtol, atol);
    }
  }
}

// Views the kernels read in place (strided, transposed, expanded) or through a
// contiguous copy (reduced dims that do not merge).
TEST(CudaReduce, NonContiguousLayouts) {
  THD_REQUIRE_CUDA();
  struct Layout {
    const char* name;
    Fn view;
  };
  const std::vector<Layout> layouts = {
      {"transpose(0,2)", [](const Tensor& x) { return x.transpose(0, 2); }},
      {"slice step 2", [](const Tensor& x) { return x.slice(1, 0, x.size(1), 2); }},
      {"slice offset", [](const Tensor& x) { return x.slice(2, 1, x.size(2)); }},
      {"permute(1,2,0)", [](const Tensor& x) { return x.permute({1, 2, 0}); }},
      {"expand", [](const Tensor& x) { return x.slice(1, 0, 1).expand({-1, 6, -1}); }},
  };
  for (DType dt : {kFloat32, kFloat16, kInt32, kBool, kFloat64}) {
    const Tensor t = exact_values({6, 10, 37}, dt);
    for (const Layout& l : layouts) {
      for (const Dims& dims : dim_sets()) {
        const std::string what = std::string(l.name) + " " + label("", dt, {6, 10, 37}, dims, false);
        expect_same(t, [&](const Tensor& x) { return l.view(x).sum(dims); }, "sum " + what);
        expect_same(t, [&](const Tensor& x) { return l.view(x).max(dims, true); }, "max " + what);
        expect_same(t, [&](const Tensor& x) { return l.view(x).any(dims); }, "any " + what);
        if (dt != kBool) {
          for (int64_t d : dims) {
            expect_same(t, [&](const Tensor& x) { return l.view(x).argmin(d); }, "argmin " + what);
          }
        }
        if (is_floating_point(dt)) {
          const auto [rtol, atol] = tolerance_for(dt);
          expect_same(t, [&](const Tensor& x) { return l.view(x).var(dims); }, "var " + what, rtol,
                      atol);
        }
      }
      if (dt != kBool) {
        expect_same(t, [&](const Tensor& x) { return l.view(x).argmax(); },
                    std::string("argmax() ") + l.name);
      }
    }
  }
  // Four dims, permuted so that neither kept nor reduced dims merge.
  const Tensor t4 = exact_values({4, 5, 6, 7}, kFloat32);
  for (const Dims& dims : {Dims{0, 2}, Dims{1, 3}, Dims{0, 1, 3}, Dims{2}}) {
    const std::string what = "permute(2,0,3,1) dims " + shape_str(dims);
    expect_same(t4, [&](const Tensor& x) { return x.permute({2, 0, 3, 1}).sum(dims); }, what);
    expect_same(t4, [&](const Tensor& x) { return x.permute({2, 0, 3, 1}).argmax(dims[0]); },
                "argmax " + what);
  }
}

// Past 2^22 elements, and the split launches: few long outputs, along rows and
// along columns.
TEST(CudaReduce, LargeReductions) {
  THD_REQUIRE_CUDA();
  const Tensor big = exact_values({(int64_t{1} << 22) + 12345}, kFloat32);
  expect_same(big, [](const Tensor& x) { return x.sum(); }, "sum 4M float32");
  expect_same(big, [](const Tensor& x) { return x.mean(); }, "mean 4M float32");
  expect_same(big, [](const Tensor& x) { return x.max(); }, "max 4M float32");
  expect_same(big, [](const Tensor& x) { return x.argmin(); }, "argmin 4M float32");
  expect_same(big, [](const Tensor& x) { return x.slice(0, 1, x.size(0), 3).sum(); },
              "sum 4M float32 step 3");
  const Tensor normal = random_cpu({(int64_t{1} << 22) + 7}, kFloat32);
  expect_same(normal, [](const Tensor& x) { return x.norm(); }, "norm 4M", 1e-5);
  expect_same(normal, [](const Tensor& x) { return x.var(); }, "var 4M", 1e-5);
  expect_same(normal, [](const Tensor& x) { return x.std(); }, "std 4M", 1e-5);
  expect_same(exact_values({(int64_t{1} << 22) + 3}, kInt8), [](const Tensor& x) { return x.sum(); },
              "sum 4M int8");
  expect_same(exact_values({(int64_t{1} << 21) + 3}, kFloat16),
              [](const Tensor& x) { return x.sum(); }, "sum 2M float16");
  expect_same(exact_values({(int64_t{1} << 22) + 5}, kBool), [](const Tensor& x) { return x.all(); },
              "all 4M bool");
  struct Case {
    Shape shape;
    Dims dims;
  };
  const std::vector<Case> cases = {
      {{3, 700001}, {1}}, {{700001, 3}, {0}}, {{700001, 3}, {1}}, {{2048, 1030}, {0}},
      {{1030, 2048}, {1}}, {{64, 129, 301}, {0, 2}}, {{301, 64, 129}, {1}}, {{2, 3000000}, {0}},
  };
  for (const Case& c : cases) {
    const Tensor t = exact_values(c.shape, kFloat32);
    const std::string what = shape_str(c.shape) + " dims " + shape_str(c.dims);
    expect_same(t, [&](const Tensor& x) { return x.sum(c.dims); }, "sum " + what);
    expect_same(t, [&](const Tensor& x) { return x.min(c.dims); }, "min " + what);
    expect_same(t, [&](const Tensor& x) { return x.var(c.dims); }, "var " + what, 1e-5, 1e-6);
    if (c.dims.size() == 1) {
      expect_same(t, [&](const Tensor& x) { return x.argmax(c.dims[0]); }, "argmax " + what);
    }
  }
}

}  // namespace
}  // namespace thd::testing
