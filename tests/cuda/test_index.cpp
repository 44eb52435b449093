// index_select, gather, scatter and masked_fill on CUDA tensors against the CPU ops,
// on fresh random inputs: every dtype, int32 and int64 indices, every dim, 0-dim and
// empty operands, non-contiguous views, repeated scatter indices (the last write in a
// line must win, as on the CPU), and the errors: out-of-range indices raise the CPU's
// IndexError and leave the device usable, mixed devices raise ValueError.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <thd/cuda.h>
#include <thd/tensor.h>

#include "cuda_test_util.h"

namespace thd {
namespace {

using testing::expect_matches_cpu;
using testing::poisoned_cuda;
using testing::random_cpu;

constexpr DType kAll[] = {kBool,    kUInt8,    kInt8,    kInt32,  kInt64,
                          kFloat16, kBFloat16, kFloat32, kFloat64};
constexpr DType kIndexTypes[] = {kInt64, kInt32};

// Index ops move elements: results must be bit-exact, whatever the dtype.
void expect_exact(const Tensor& gpu, const Tensor& cpu) { expect_matches_cpu(gpu, cpu, 0, 0); }

// A freed poisoned block of the result's size, so the caching allocator likely hands
// it to the op's output: an element the op forgets to write stays NaN / -1.
void poison_next_output(const Shape& shape, DType dt) { (void)poisoned_cuda(shape, dt); }

// A view taken of a tensor on both devices, so the CUDA operand has the strides the
// test means (a copy to the device makes its own layout).
using View = std::function<Tensor(const Tensor&)>;
Tensor same(const Tensor& t) { return t; }
Tensor transposed(const Tensor& t) { return t.transpose(0, -1); }

struct Both {
  Tensor cpu;
  Tensor gpu;
};
Both both(const Tensor& cpu_base, const View& view = same) {
  return {view(cpu_base), view(cpu_base.cuda())};
}

Tensor random_index(int64_t bound, const Shape& shape, DType dt) {
  return Tensor::randint(0, bound, shape, dt);
}

// Runs f and expects the IndexError of an out-of-range index naming `bad`.
template <typename F>
void expect_index_error(F&& f, int64_t bad) {
  try {
    f();
    ADD_FAILURE() << "expected IndexError for index " << bad;
  } catch (const IndexError& e) {
    EXPECT_NE(e.message().find("index " + std::to_string(bad) + " is out of bounds"),
              std::string::npos)
        << e.what();
  }
}

// The device is still usable: no sticky error, and a new op computes.
void expect_device_usable() {
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_NO_THROW(cuda::synchronize());
  const Tensor x = random_cpu({33}, kFloat32);
  expect_exact(x.cuda().index_select(0, Tensor::arange(33).cuda()), x);
}

// ---- index_select -----------------------------------------------------------------

void check_index_select(const Both& self, int64_t dim, const Tensor& index_cpu) {
  SCOPED_TRACE(shape_str(self.cpu.shape()) + " dim " + std::to_string(dim) + " index " +
               shape_str(index_cpu.shape()) + " " + std::string(dtype_name(index_cpu.dtype())) +
               " " + std::string(dtype_name(self.cpu.dtype())));
  const Tensor want = self.cpu.index_select(dim, index_cpu);
  poison_next_output(want.shape(), want.dtype());
  expect_exact(self.gpu.index_select(dim, index_cpu.cuda()), want);
}

TEST(CudaIndexSelect, EveryDTypeDimAndIndexType) {
  THD_REQUIRE_CUDA();
  for (DType dt : kAll) {
    const Tensor base = random_cpu({6, 7, 5}, dt);
    for (int64_t dim : {0, 1, 2, -1}) {
      const int64_t size = base.size(dim);
      for (DType it : kIndexTypes) {
        check_index_select(both(base), dim, random_index(size, {9}, it));
        check_index_select(both(base, transposed), dim, random_index(5, {4}, it));
      }
    }
  }
}

TEST(CudaIndexSelect, ShapesAndViews) {
  THD_REQUIRE_CUDA();
  for (DType it : kIndexTypes) {
    // Embedding-like lookup and a large one-dim gather.
    check_index_select(both(random_cpu({300, 129}, kFloat32)), 0, random_index(300, {1000}, it));
    check_index_select(both(random_cpu({70001}, kBFloat16)), 0, random_index(70001, {100003}, it));
    // 0-dim self, 0-dim and empty index, empty self, odd sizes.
    check_index_select(both(random_cpu({}, kInt64)), 0, Tensor::zeros({1}, it));
    check_index_select(both(random_cpu({5, 3}, kInt8)), 1, Tensor::zeros({}, it) + 2);
    check_index_select(both(random_cpu({5, 3}, kFloat64)), 0, Tensor::zeros({0}, it));
    check_index_select(both(random_cpu({0, 3}, kFloat32)), 1, random_index(3, {4}, it));
    // A strided index (every other element) and a sliced self.
    const Tensor strided = random_index(11, {20}, it).slice(0, 0, 20, 2);
    check_index_select(both(random_cpu({4, 11, 3}, kFloat16)), 1, strided);
    check_index_select(
        both(random_cpu({8, 13}, kInt32), [](const Tensor& t) { return t.slice(1, 1, 13, 3); }),
        1, random_index(4, {6}, it));
  }
}

// ---- gather -----------------------------------------------------------------------

void check_gather(const Both& self, int64_t dim, const Tensor& index_cpu) {
  SCOPED_TRACE(shape_str(self.cpu.shape()) + " dim " + std::to_string(dim) + " index " +
               shape_str(index_cpu.shape()) + " " + std::string(dtype_name(index_cpu.dtype())) +
               " " + std::string(dtype_name(self.cpu.dtype())));
  const Tensor want = self.cpu.gather(dim, index_cpu);
  poison_next_output(want.shape(), want.dtype());
  expect_exact(self.gpu.gather(dim, index_cpu.cuda()), want);
}

TEST(CudaGather, EveryDTypeDimAndIndexType) {
  THD_REQUIRE_CUDA();
  for (DType dt : kAll) {
    const Tensor base = random_cpu({5, 6, 7}, dt);
    for (int64_t dim : {0, 1, 2, -2}) {
      const int64_t size = base.size(dim);
      for (DType it : kIndexTypes) {
        // The index may be longer along dim and shorter elsewhere.
        Shape shape = {4, 3, 6};
        shape[dim < 0 ? dim + 3 : dim] = 9;
        check_gather(both(base), dim, random_index(size, shape, it));
        check_gather(both(base), dim, random_index(size, base.shape(), it));
        const Both t = both(base, transposed);
        check_gather(t, dim, random_index(t.cpu.size(dim), {3, 2, 4}, it));
      }
    }
  }
}

TEST(CudaGather, ShapesAndViews) {
  THD_REQUIRE_CUDA();
  for (DType it : kIndexTypes) {
    check_gather(both(random_cpu({}, kFloat32)), 0, Tensor::zeros({}, it));
    check_gather(both(random_cpu({4}, kInt64)), 0, Tensor::zeros({}, it) + 3);
    check_gather(both(random_cpu({6, 4}, kUInt8)), 1, Tensor::zeros({6, 0}, it));
    check_gather(both(random_cpu({300, 301}, kFloat32)), 1, random_index(301, {299, 400}, it));
    check_gather(both(random_cpu({3, 70000}, kFloat16)), 1, random_index(70000, {3, 70001}, it));
    // A transposed index.
    check_gather(both(random_cpu({9, 8}, kBool)), 0, random_index(9, {8, 9}, it).t());
  }
}

// ---- scatter ----------------------------------------------------------------------

// scatter_ (into a copy of self) and scatter give the CPU's result, with src.
void check_scatter(const Both& self, int64_t dim, const Tensor& index_cpu, const Both& src) {
  SCOPED_TRACE(shape_str(self.cpu.shape()) + " dim " + std::to_string(dim) + " index " +
               shape_str(index_cpu.shape()) + " " + std::string(dtype_name(index_cpu.dtype())) +
               " " + std::string(dtype_name(self.cpu.dtype())));
  const Tensor index = index_cpu.cuda();
  const Tensor want = self.cpu.scatter(dim, index_cpu, src.cpu);
  poison_next_output(want.shape(), want.dtype());
  expect_exact(self.gpu.scatter(dim, index, src.gpu), want);
  Tensor in_place = self.gpu.clone();
  in_place.scatter_(dim, index, src.gpu);
  expect_exact(in_place, want);
}

void check_scatter_value(const Both& self, int64_t dim, const Tensor& index_cpu, Scalar value) {
  SCOPED_TRACE(shape_str(self.cpu.shape()) + " dim " + std::to_string(dim) + " " +
               std::string(dtype_name(self.cpu.dtype())));
  const Tensor index = index_cpu.cuda();
  const Tensor want = self.cpu.scatter(dim, index_cpu, value);
  poison_next_output(want.shape(), want.dtype());
  expect_exact(self.gpu.scatter(dim, index, value), want);
  Tensor in_place = self.gpu.clone();
  in_place.scatter_(dim, index, value);
  expect_exact(in_place, want);
}

TEST(CudaScatter, EveryDTypeDimAndIndexType) {
  THD_REQUIRE_CUDA();
  for (DType dt : kAll) {
    const Tensor base = random_cpu({5, 6, 7}, dt);
    for (int64_t dim : {0, 1, 2, -1}) {
      for (DType it : kIndexTypes) {
        // Lines of 4 (one thread each) and of 20 (claim then write): both with many
        // repeated targets, so only the CPU's order gives its result.
        for (int64_t n : {4, 20}) {
          Shape shape = {3, 4, 5};
          shape[dim < 0 ? dim + 3 : dim] = n;
          const Tensor index = random_index(base.size(dim), shape, it);
          check_scatter(both(base), dim, index, both(random_cpu({20, 20, 20}, dt)));
        }
        check_scatter_value(both(base), dim, random_index(base.size(dim), {4, 5, 6}, it),
                            dt == kBool ? Scalar(true) : Scalar(3));
      }
    }
  }
}

TEST(CudaScatter, ShapesViewsAndRepeats) {
  THD_REQUIRE_CUDA();
  // One long line with a few targets: every target written many times.
  check_scatter(both(random_cpu({50}, kFloat32)), 0, random_index(50, {5000}, kInt64),
                both(random_cpu({5000}, kFloat32)));
  // Many lines along dim 0 (the claim table's line numbering with inner dims).
  check_scatter(both(random_cpu({10, 300}, kInt32)), 0, random_index(10, {200, 300}, kInt32),
                both(random_cpu({200, 301}, kInt32)));
  // A long line into a target dim too large for a claim table: one thread per line.
  check_scatter(both(random_cpu({(1 << 24) + 1}, kUInt8)), 0,
                random_index((1 << 24) + 1, {100}, kInt64), both(random_cpu({100}, kUInt8)));
  // Non-contiguous self, src and index.
  check_scatter(both(random_cpu({9, 12}, kFloat64), transposed), 1,
                random_index(9, {14, 9}, kInt64).t(),
                both(random_cpu({12, 30}, kFloat64),
                     [](const Tensor& t) { return t.slice(1, 0, 30, 2); }));
  // 0-dim self, index and src; an empty index.
  check_scatter(both(random_cpu({}, kInt64)), 0, Tensor::zeros({}, kInt64),
                both(random_cpu({}, kInt64)));
  check_scatter(both(random_cpu({4, 4}, kFloat16)), 1, Tensor::zeros({4, 0}, kInt64),
                both(random_cpu({4, 4}, kFloat16)));
  check_scatter_value(both(random_cpu({3, 70000}, kBFloat16)), 1,
                      random_index(70000, {3, 80000}, kInt32), 2.5);
  check_scatter_value(both(random_cpu({7}, kInt8)), 0, random_index(7, {30}, kInt64), -128);
}

TEST(CudaScatter, SourceAliasingSelf) {
  THD_REQUIRE_CUDA();
  const Tensor base = random_cpu({6, 6}, kFloat32);
  const Tensor index = random_index(6, {6, 6}, kInt64);
  Tensor cpu = base.clone();
  cpu.scatter_(1, index, cpu.t());
  Tensor gpu = base.cuda();
  gpu.scatter_(1, index.cuda(), gpu.t());
  expect_exact(gpu, cpu);
}

// ---- masked_fill ------------------------------------------------------------------

void check_masked_fill(const Both& self, const Tensor& mask_cpu, Scalar value) {
  SCOPED_TRACE(shape_str(self.cpu.shape()) + " mask " + shape_str(mask_cpu.shape()) + " " +
               std::string(dtype_name(self.cpu.dtype())));
  const Tensor mask = mask_cpu.cuda();
  const Tensor want = self.cpu.masked_fill(mask_cpu, value);
  poison_next_output(want.shape(), want.dtype());
  expect_exact(self.gpu.masked_fill(mask, value), want);
  if (want.shape() == self.cpu.shape()) {
    Tensor in_place = self.gpu.clone();
    in_place.masked_fill_(mask, value);
    expect_exact(in_place, want);
    // In place into a non-contiguous view of a fresh copy.
    Tensor cpu_t = self.cpu.clone().t().contiguous().t();
    Tensor gpu_t = self.gpu.clone().t().contiguous().t();
    if (self.cpu.dim() == 2) {
      cpu_t.masked_fill_(mask_cpu, value);
      gpu_t.masked_fill_(mask, value);
      expect_exact(gpu_t, cpu_t);
    }
  }
}

TEST(CudaMaskedFill, EveryDTypeAndBroadcast) {
  THD_REQUIRE_CUDA();
  for (DType dt : kAll) {
    const Scalar value = dt == kBool               ? Scalar(true)
                         : is_floating_point(dt) ? Scalar(-1.5)
                                                 : Scalar(7);
    const Tensor base = random_cpu({17, 33}, dt);
    check_masked_fill(both(base), random_cpu({17, 33}, kBool), value);
    check_masked_fill(both(base), random_cpu({33}, kBool), value);
    check_masked_fill(both(base), random_cpu({17, 1}, kBool), value);
    check_masked_fill(both(base), random_cpu({}, kBool), value);
    check_masked_fill(both(base, transposed), random_cpu({33, 17}, kBool), value);
    // Out of place, self broadcasts to the mask too.
    check_masked_fill(both(random_cpu({33}, dt)), random_cpu({5, 33}, kBool), value);
  }
  check_masked_fill(both(random_cpu({3, 70001}, kFloat32)), random_cpu({3, 70001}, kBool),
                    std::numeric_limits<double>::infinity());
  check_masked_fill(both(random_cpu({0, 4}, kInt32)), random_cpu({4}, kBool), 1);
}

TEST(CudaMaskedFill, MaskAliasingSelf) {
  THD_REQUIRE_CUDA();
  // The mask is self shifted by one: it must be read before self is written.
  const Tensor base = random_cpu({40}, kBool);
  Tensor cpu = base.clone();
  cpu.slice(0, 0, 39).masked_fill_(cpu.slice(0, 1, 40), true);
  Tensor gpu = base.cuda();
  gpu.slice(0, 0, 39).masked_fill_(gpu.slice(0, 1, 40), true);
  expect_exact(gpu, cpu);
}

// ---- errors -----------------------------------------------------------------------

TEST(CudaIndexErrors, OutOfRangeIndexRaisesAndLeavesSelfAndDeviceIntact) {
  THD_REQUIRE_CUDA();
  const Tensor base = random_cpu({4, 5}, kFloat32);
  const Tensor self = base.cuda();
  for (DType it : kIndexTypes) {
    for (int64_t bad : {5, 1000, -1}) {
      SCOPED_TRACE("bad index " + std::to_string(bad) + " " + std::string(dtype_name(it)));
      // The bad value sits among good ones, after them in row-major order.
      Tensor index_cpu = Tensor::zeros({4, 3}, it);
      index_cpu.select(0, 2).select(0, 1).fill_(bad);
      index_cpu.select(0, 3).fill_(1);
      const Tensor index = index_cpu.cuda();
      expect_index_error([&] { (void)self.gather(1, index); }, bad);
      expect_index_error([&] { (void)self.index_select(1, index_cpu.reshape({-1}).cuda()); }, bad);
      expect_index_error([&] { (void)self.scatter(1, index, self); }, bad);
      expect_index_error([&] { (void)self.scatter(1, index, 1.0); }, bad);
      Tensor target = self.clone();
      expect_index_error([&] { target.scatter_(1, index, self.neg()); }, bad);
      expect_index_error([&] { target.scatter_(1, index, 2.0); }, bad);
      expect_exact(target, base);  // untouched
      // An empty output still checks its index, as the CPU does.
      expect_index_error([&] { (void)self.slice(0, 0, 0).index_select(1, index.reshape({-1})); },
                         bad);
      expect_device_usable();
    }
  }
  const Tensor scalar = random_cpu({}, kInt8).cuda();
  expect_index_error([&] { (void)scalar.index_select(0, Tensor::ones({1}, kInt64).cuda()); }, 1);
  expect_device_usable();
}

TEST(CudaIndexErrors, ArgumentErrorsMatchTheCpu) {
  THD_REQUIRE_CUDA();
  const Tensor self = random_cpu({4, 5}, kFloat32).cuda();
  const Tensor index = Tensor::zeros({4, 5}, kInt64).cuda();
  EXPECT_THROW((void)self.gather(1, index.to(kInt8)), TypeError);
  EXPECT_THROW((void)self.index_select(0, index), IndexError);  // not a vector
  EXPECT_THROW((void)self.gather(1, Tensor::zeros({5, 5}, kInt64).cuda()), ShapeError);
  EXPECT_THROW((void)self.scatter(1, index, self.to(kFloat64)), TypeError);
  EXPECT_THROW((void)self.masked_fill(Tensor::ones({4, 5}, kInt32).cuda(), 1), TypeError);
  EXPECT_THROW((void)self.to(kInt8).masked_fill(Tensor::ones({5}, kBool).cuda(), 1000), ValueError);
}

TEST(CudaIndexErrors, MixedDevices) {
  THD_REQUIRE_CUDA();
  const Tensor cpu = random_cpu({4, 5}, kFloat32);
  const Tensor gpu = cpu.cuda();
  const Tensor index_cpu = Tensor::zeros({4, 5}, kInt64);
  const Tensor index_gpu = index_cpu.cuda();
  const Tensor mask_cpu = Tensor::ones({4, 5}, kBool);
  EXPECT_THROW((void)gpu.index_select(0, index_cpu.select(0, 0)), ValueError);
  EXPECT_THROW((void)cpu.index_select(0, index_gpu.select(0, 0)), ValueError);
  EXPECT_THROW((void)gpu.gather(1, index_cpu), ValueError);
  EXPECT_THROW((void)cpu.gather(1, index_gpu), ValueError);
  EXPECT_THROW((void)gpu.scatter(1, index_cpu, gpu), ValueError);
  EXPECT_THROW((void)gpu.scatter(1, index_gpu, cpu), ValueError);
  EXPECT_THROW((void)cpu.scatter(1, index_gpu, 1.0), ValueError);
  EXPECT_THROW((void)gpu.masked_fill(mask_cpu, 1.0), ValueError);
  EXPECT_THROW((void)cpu.masked_fill(mask_cpu.cuda(), 1.0), ValueError);
  Tensor target = gpu.clone();
  EXPECT_THROW(target.masked_fill_(mask_cpu, 1.0), ValueError);
  expect_exact(target, cpu);
}

}  // namespace
}  // namespace thd
