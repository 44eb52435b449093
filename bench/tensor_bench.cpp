// The "tensor" suite: thd's CPU kernels as users call them, next to what the hardware
// does with a plain C++ loop or a direct BLAS call on the same buffers.
//
// Figures (sizes shrink under --quick, and the names say the size used):
//   tensor.add.f32.64MiB        c = a.add(b), output allocated by the op    GB/s (3 x 64 MiB moved)
//   tensor.add_.f32.64MiB       x.add_(b), in place: the kernel alone        GB/s
//   ref.stream_add.f32.64MiB    c[i] = a[i] + b[i], one thread, c reused     GB/s
//   ref.stream_add_mt.f32.64MiB the same loop split over all cores           GB/s
//   ref.stream_add_fresh.f32.64MiB the loop into a freshly malloc'd c        GB/s
//   tensor.sum.f32.64MiB        a.sum()                                      GB/s (64 MiB read)
//   ref.sum.f32.64MiB           vectorizable float loop, one thread          GB/s
//   ref.sum_mt.f32.64MiB        the same loop split over all cores           GB/s
//   tensor.matmul.f32.1024      a.matmul(b), 1024 x 1024                     GFLOP/s (2 n^3)
//   tensor.matmul_tn.f32.1024   a.t().matmul(b): a transposed operand        GFLOP/s
//   ref.sgemm.f32.1024          cblas_sgemm on the same buffers, c reused    GFLOP/s
//   tensor.bmm.f32.4096x32      4096 products of 32 x 32 matrices            GFLOP/s
//   ref.sgemm_loop.f32.4096x32  one cblas_sgemm per batch, one thread        GFLOP/s
//   tensor.<op>.f32.16          a small op as a worker runs it: a.add(b),    ns/op
//                               a.add(2.0), x.add_(b), a.mul(b), a.exp(), a.sum() on
//                               16 floats (new outputs allocated by the op), x.fill_(1.5)
//   ref.add.f32.16              c[i] = a[i] + b[i] over 16 floats, c reused  ns/op
//   ref.sum.f32.16              the reference sum loop over 16 floats        ns/op
//   ratio.<op>                  thd's rate / the reference's rate            x
//   ratio.<op>.mt               thd's rate / the all-cores reference's rate  x
//   ratio.<op>.f32.16           the reference's time / thd's time            x
#include <cblas.h>

#include <cstdlib>
#include <string>

#include <thd/tensor.h>

#include "bench/harness.h"
#include "bench/reference.h"
#include "tensor/parallel.h"

namespace thd::bench {
namespace {

constexpr double kGiga = 1e9;

std::string size_label(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) {
    return std::to_string(bytes >> 20) + "MiB";
  }
  return std::to_string(bytes >> 10) + "KiB";
}

// Deterministic values in [-1, 1), written directly so the suite needs no RNG.
Tensor filled(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::empty(shape, kFloat32);
  float* p = t.data<float>();
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = static_cast<float>(x >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }
  return t;
}

// Keeps a result observable.
volatile float g_sink = 0;

void bench_add(Context& ctx) {
  ctx.begin_group("add");
  const int64_t n = ctx.options().quick ? (int64_t{1} << 18) : (int64_t{1} << 24);
  const std::string sz = size_label(n * 4);
  const Tensor a = filled({n}, 1), b = filled({n}, 2);
  Tensor c = Tensor::empty({n}, kFloat32);
  Tensor x = filled({n}, 3);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = c.data<float>();
  // As many threads as thd's own pool runs.
  const int threads = thd::detail::num_threads();
  const std::vector<double> t = ctx.time({
      {"tensor.add.f32." + sz, [&] { (void)a.add(b); }},
      {"tensor.add_.f32." + sz, [&] { x.add_(b); }},
      {"ref.stream_add.f32." + sz, [&] { ref::stream_add(pa, pb, pc, n); }},
      {"ref.stream_add_mt.f32." + sz, [&] { ref::stream_add_threads(pa, pb, pc, n, threads); }},
      {"ref.stream_add_fresh.f32." + sz,
       [&] {
         // What any fresh output costs: 64 MiB of new pages, faulted in on first write.
         auto* out = static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(n) * 4));
         ref::stream_add(pa, pb, out, n);
         g_sink = out[n - 1];
         std::free(out);
       }},
  });
  const double gb = 3.0 * static_cast<double>(n) * 4 / kGiga;
  ctx.report("tensor.add.f32." + sz, gb / t[0], "GB/s");
  ctx.report("tensor.add_.f32." + sz, gb / t[1], "GB/s");
  ctx.report("ref.stream_add.f32." + sz, gb / t[2], "GB/s");
  ctx.report("ref.stream_add_mt.f32." + sz, gb / t[3], "GB/s");
  ctx.report("ref.stream_add_fresh.f32." + sz, gb / t[4], "GB/s");
  ctx.report("ratio.add", t[2] / t[0], "x");
  ctx.report("ratio.add_", t[2] / t[1], "x");
  ctx.report("ratio.add.mt", t[3] / t[0], "x");
}

void bench_sum(Context& ctx) {
  ctx.begin_group("sum");
  const int64_t n = ctx.options().quick ? (int64_t{1} << 18) : (int64_t{1} << 24);
  const std::string sz = size_label(n * 4);
  const Tensor a = filled({n}, 4);
  const float* pa = a.data<float>();
  const int threads = thd::detail::num_threads();
  const std::vector<double> t = ctx.time({
      {"tensor.sum.f32." + sz, [&] { (void)a.sum(); }},
      {"ref.sum.f32." + sz, [&] { g_sink = ref::sum(pa, n); }},
      {"ref.sum_mt.f32." + sz, [&] { g_sink = ref::sum_threads(pa, n, threads); }},
  });
  const double gb = static_cast<double>(n) * 4 / kGiga;
  ctx.report("tensor.sum.f32." + sz, gb / t[0], "GB/s");
  ctx.report("ref.sum.f32." + sz, gb / t[1], "GB/s");
  ctx.report("ref.sum_mt.f32." + sz, gb / t[2], "GB/s");
  ctx.report("ratio.sum", t[1] / t[0], "x");
  ctx.report("ratio.sum.mt", t[2] / t[0], "x");
}

// The fixed cost of an op on a tiny tensor (checks, output allocation, dispatch):
// what bounds a worker that executes a stream of small commands. The size stays 16
// under --quick: it is the point of the figure.
void bench_small(Context& ctx) {
  ctx.begin_group("small");
  constexpr int64_t n = 16;
  const Tensor a = filled({n}, 10), b = filled({n}, 11);
  Tensor x = filled({n}, 12);
  Tensor c = Tensor::empty({n}, kFloat32);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = c.data<float>();
  const std::vector<double> t = ctx.time({
      {"tensor.add.f32.16", [&] { (void)a.add(b); }},
      {"tensor.sum.f32.16", [&] { (void)a.sum(); }},
      {"ref.add.f32.16", [&] { ref::stream_add(pa, pb, pc, n); }},
      {"ref.sum.f32.16", [&] { g_sink = ref::sum(pa, n); }},
      {"tensor.add_scalar.f32.16", [&] { (void)a.add(2.0); }},
      {"tensor.add_.f32.16", [&] { x.add_(b); }},
      {"tensor.mul.f32.16", [&] { (void)a.mul(b); }},
      {"tensor.exp.f32.16", [&] { (void)a.exp(); }},
      {"tensor.fill_.f32.16", [&] { x.fill_(1.5); }},
  });
  constexpr double kNano = 1e9;
  ctx.report("tensor.add.f32.16", t[0] * kNano, "ns/op");
  ctx.report("tensor.sum.f32.16", t[1] * kNano, "ns/op");
  ctx.report("ref.add.f32.16", t[2] * kNano, "ns/op");
  ctx.report("ref.sum.f32.16", t[3] * kNano, "ns/op");
  ctx.report("tensor.add_scalar.f32.16", t[4] * kNano, "ns/op");
  ctx.report("tensor.add_.f32.16", t[5] * kNano, "ns/op");
  ctx.report("tensor.mul.f32.16", t[6] * kNano, "ns/op");
  ctx.report("tensor.exp.f32.16", t[7] * kNano, "ns/op");
  ctx.report("tensor.fill_.f32.16", t[8] * kNano, "ns/op");
  ctx.report("ratio.add.f32.16", t[2] / t[0], "x");
  ctx.report("ratio.sum.f32.16", t[3] / t[1], "x");
}

void bench_matmul(Context& ctx) {
  ctx.begin_group("matmul");
  const int n = ctx.options().quick ? 64 : 1024;
  const std::string sz = std::to_string(n);
  const Tensor a = filled({n, n}, 5), b = filled({n, n}, 6);
  const Tensor at = filled({n, n}, 7).t();
  Tensor c = Tensor::empty({n, n}, kFloat32);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = c.data<float>();
  const std::vector<double> t = ctx.time({
      {"tensor.matmul.f32." + sz, [&] { (void)a.matmul(b); }},
      {"tensor.matmul_tn.f32." + sz, [&] { (void)at.matmul(b); }},
      {"ref.sgemm.f32." + sz,
       [&] {
         cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, pa, n, pb, n,
                     0.0f, pc, n);
       }},
  });
  const double gflop = 2.0 * n * n * n / kGiga;
  ctx.report("tensor.matmul.f32." + sz, gflop / t[0], "GFLOP/s");
  ctx.report("tensor.matmul_tn.f32." + sz, gflop / t[1], "GFLOP/s");
  ctx.report("ref.sgemm.f32." + sz, gflop / t[2], "GFLOP/s");
  ctx.report("ratio.matmul", t[2] / t[0], "x");
}

void bench_bmm(Context& ctx) {
  ctx.begin_group("bmm");
  const int batches = ctx.options().quick ? 8 : 4096;
  const int n = 32;
  const std::string sz = std::to_string(batches) + "x" + std::to_string(n);
  const Tensor a = filled({batches, n, n}, 8), b = filled({batches, n, n}, 9);
  Tensor c = Tensor::empty({batches, n, n}, kFloat32);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = c.data<float>();
  const int64_t step = int64_t{n} * n;
  const std::vector<double> t = ctx.time({
      {"tensor.bmm.f32." + sz, [&] { (void)a.bmm(b); }},
      {"ref.sgemm_loop.f32." + sz,
       [&] {
         for (int64_t i = 0; i < batches; ++i) {
           cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, pa + i * step,
                       n, pb + i * step, n, 0.0f, pc + i * step, n);
         }
       }},
  });
  const double gflop = 2.0 * batches * n * n * n / kGiga;
  ctx.report("tensor.bmm.f32." + sz, gflop / t[0], "GFLOP/s");
  ctx.report("ref.sgemm_loop.f32." + sz, gflop / t[1], "GFLOP/s");
  ctx.report("ratio.bmm", t[1] / t[0], "x");
}

void run(Context& ctx) {
  bench_add(ctx);
  bench_sum(ctx);
  bench_small(ctx);
  bench_matmul(ctx);
  bench_bmm(ctx);
}

[[maybe_unused]] const bool registered = register_suite(
    {"tensor", "dense CPU tensor ops (add, sum, small ops, matmul, bmm) against plain loops and BLAS", run});

}  // namespace
}  // namespace thd::bench
