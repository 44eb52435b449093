// The master's elementwise path takes nothing from the heap per op once warm: the
// result's handle and its mirror's storage come from per-thread pools, a result's
// mirror is made only when something asks for it, and the command is written into
// the batch's buffer in place. Counted with a replaced operator new, on the issuing
// thread only (the flusher, reply and transport threads have their own work). And
// results inferred without a mirror are those inferred through one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <new>
#include <thread>
#include <vector>

#include <thd/distributed.h>

#include "job_fixture.h"
#include "master/block_pool.h"

namespace {

thread_local bool t_counting = false;
thread_local long t_allocations = 0;

void* counted_alloc(std::size_t n, std::size_t align = 0) {
  if (t_counting) ++t_allocations;
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align) : std::malloc(n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_alloc(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_alloc(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace thd::test {
namespace {

class DispatchAllocations : public JobTest<1> {};

// Heap allocations on this thread while `f` runs.
template <typename F>
long allocations_in(F&& f) {
  t_allocations = 0;
  t_counting = true;
  f();
  t_counting = false;
  return t_allocations;
}

TEST_F(DispatchAllocations, AWarmElementwiseLoopAllocatesNothingPerOp) {
  if (!thd::master::kPoolBlocks) GTEST_SKIP() << "AddressSanitizer build: the master's block pools hand every block back";
  const DistributedTensor a = DistributedTensor::ones({16});
  const DistributedTensor b = DistributedTensor::ones({16});
  DistributedTensor c;
  // Warm: the pools hold blocks, the dtype is remembered, the buffers have grown.
  for (int i = 0; i < 2000; ++i) {
    c = a + b;
    c = c * 2.0;
    c = c.relu();
  }
  synchronize();
  // Fewer ops than fill a batch, so the issuing thread sends nothing itself.
  constexpr int kRounds = 60;
  const long n = allocations_in([&] {
    for (int i = 0; i < kRounds; ++i) {
      c = a + b;
      c = c * 2.0;
      c = c.relu();
    }
  });
  // A few at most, when the flusher sends the buffer meanwhile and the queue of
  // frees grows anew; before the pools and the lazy mirror, each op took five
  // (handle, storage, shape, strides, the inferred shape).
  EXPECT_LT(n, kRounds * 3 / 2) << n << " allocations for " << kRounds * 3 << " ops";
  std::cout << "[ INFO ] " << n << " heap allocations for " << kRounds * 3 << " ops\n";
  synchronize();
  // The results are whole tensors: their mirror is made when asked for.
  EXPECT_EQ(c.shape(), (Shape{16}));
  EXPECT_EQ(c.dtype(), kFloat32);
  EXPECT_EQ(c.view({4, 4}).get().to_vector<float>(), std::vector<float>(16, 4.0f));
}

TEST_F(DispatchAllocations, AFreshResultsMirrorIsMadeOnceFromAnyThread) {
  const DistributedTensor a = DistributedTensor::ones({2, 3});
  const DistributedTensor c = a + a;
  std::vector<std::thread> threads;
  std::vector<Shape> seen(8);
  for (size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&, i] { seen[i] = c.transpose(0, 1).shape(); });
  }
  for (auto& t : threads) t.join();
  for (const Shape& s : seen) EXPECT_EQ(s, (Shape{3, 2}));
  EXPECT_EQ(c.get().to_vector<float>(), std::vector<float>(6, 2.0f));
}

// The second call of an op is inferred from the dtype cache and the operands'
// shapes alone: its result has the dtype and shape of the first, inferred through
// the mirrors, and of the tensor library's own call; and its values are right.
TEST_F(DispatchAllocations, ResultsInferredFromTheCacheMatchTheLibrary) {
  const std::vector<DType> dtypes{kBool, kInt32, kInt64, kFloat32, kFloat64};
  for (DType da : dtypes) {
    for (DType db : dtypes) {
      for (const Shape& shape : {Shape{}, Shape{3}, Shape{2, 1, 3}}) {
        SCOPED_TRACE(std::string(dtype_name(da)) + " " + std::string(dtype_name(db)) + " " + shape_str(shape));
        const Tensor la = Tensor::ones(shape, da), lb = Tensor::ones(shape, db);
        const DistributedTensor a = la.dist_send(0), b = lb.dist_send(0);
        for (int round = 0; round < 2; ++round) {
          const DistributedTensor sum = a + b, lt = a.lt(b), prod = a * 3, ex = a.exp();
          EXPECT_EQ(sum.dtype(), (la + lb).dtype());
          EXPECT_EQ(lt.dtype(), la.lt(lb).dtype());
          EXPECT_EQ(prod.dtype(), (la * 3).dtype());
          // A refusal is remembered as a refusal (torch refuses a bool operand of `-`).
          if (da == kBool) {
            EXPECT_THROW(2.5 - a, TypeError);
          } else {
            EXPECT_EQ((2.5 - a).dtype(), (2.5 - la).dtype());
          }
          EXPECT_EQ(ex.dtype(), la.exp().dtype());
          EXPECT_EQ(sum.shape(), shape);
          EXPECT_EQ(ex.shape(), shape);
          EXPECT_EQ(sum.get().to_vector<double>(), (la + lb).to_vector<double>());
        }
      }
    }
  }
}

}  // namespace
}  // namespace thd::test
