// The "cuda" suite: thd's CUDA tensor ops as users call them, next to what the GPU
// does with a direct library call on the same buffers. Skipped (a note on stderr, no
// figures, exit 0) where there is no CUDA device.
//
// Figures (sizes shrink under --quick, and the names say the size used):
//   cuda.matmul.bf16.8192     a.matmul(b), bfloat16 8192 x 8192, output allocated
//                             by the op                                      TFLOP/s (2 n^3)
//   ref.cublas.bf16.8192      the same product through cuBLAS directly into a reused
//                             c: the fastest of cublasLt's heuristic algorithms
//                             (each timed here) and cublasGemmEx              TFLOP/s
//   ratio.cuda.matmul.bf16    thd / reference (target >= 0.95)               x
//   cuda.add.f32.1GiB         a + b on two 1 GiB float32 tensors, output
//                             allocated by the op                           GB/s (3 GiB moved)
//   ref.cuda.d2d_copy.1GiB    cudaMemcpyAsync of 1 GiB, device to device    GB/s (2 GiB moved)
//   ratio.cuda.add.f32        thd / reference (target >= 0.8)                x
// Every figure is timed with CUDA events on the stream thd issues to: after a warm-up
// call, each repetition is a run of back-to-back calls lasting --min-time, and the
// repetitions of a figure and its reference are interleaved. The targets are checked
// on stderr for full runs.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <thd/cuda.h>
#include <thd/tensor.h>

#include "bench/harness.h"
#include "tensor/cuda/cuda_stream.h"

namespace thd::bench {
namespace {

constexpr double kGiga = 1e9;
constexpr double kTera = 1e12;
constexpr int kDevice = 0;
// How long one timed run may take before the suite gives up on the GPU.
constexpr double kWaitSeconds = 120;

constexpr double kMatmulTarget = 0.95;
constexpr double kAddTarget = 0.8;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(fmt::format("{}: {} ({})", what, cudaGetErrorString(err),
                                         cudaGetErrorName(err)));
  }
}

void check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(fmt::format("{}: {}", what, cublasGetStatusString(st)));
  }
}

// Waits for an event without blocking forever on a hung GPU.
void wait_event(cudaEvent_t e) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(kWaitSeconds);
  for (;;) {
    const cudaError_t st = cudaEventQuery(e);
    if (st == cudaSuccess) return;
    if (st != cudaErrorNotReady) check(st, "cudaEventQuery");
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error(fmt::format("the GPU did not finish a timed run in {} s", kWaitSeconds));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

class Event {
 public:
  Event() { check(cudaEventCreate(&e_), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// Seconds per call of `body` over `calls` back-to-back calls on `stream`.
double time_calls(const std::function<void()>& body, int64_t calls, cudaStream_t stream) {
  Event start, stop;
  check(cudaEventRecord(start.get(), stream), "cudaEventRecord");
  for (int64_t i = 0; i < calls; ++i) body();
  check(cudaEventRecord(stop.get(), stream), "cudaEventRecord");
  wait_event(stop.get());
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime");
  return std::max(static_cast<double>(ms) * 1e-3, 1e-9) / static_cast<double>(calls);
}

// Context::time for GPU work: the same warm-up, repetition sizing, interleaving and
// statistic, with CUDA-event times of the work on `stream` instead of host times.
std::vector<double> time_gpu(Context& ctx, cudaStream_t stream, const std::vector<Case>& cases) {
  const Options& opt = ctx.options();
  const size_t n = cases.size();
  std::vector<double> result(n, std::numeric_limits<double>::quiet_NaN());
  std::vector<int64_t> calls(n, 0);
  std::vector<std::vector<double>> samples(n);
  for (size_t c = 0; c < n; ++c) {
    if (!ctx.enabled(cases[c].name)) continue;
    (void)time_calls(cases[c].body, 1, stream);  // warm-up: allocations, heuristics
    const double once = time_calls(cases[c].body, 1, stream);
    if (opt.quick) {
      result[c] = once;
      continue;
    }
    const int64_t sized = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(opt.rep_seconds / once)));
    calls[c] = grow_short_repetition(
        sized, opt.rep_seconds, [&](int64_t k) { return time_calls(cases[c].body, k, stream); },
        [](int64_t k) { return k; });
  }
  if (opt.quick) return result;
  for (int r = 0; r < opt.reps; ++r) {
    for (size_t c = 0; c < n; ++c) {
      if (calls[c] > 0) samples[c].push_back(time_calls(cases[c].body, calls[c], stream));
    }
  }
  for (size_t c = 0; c < n; ++c) {
    if (samples[c].empty()) continue;
    result[c] = statistic_of(samples[c], opt.stat);
    if (opt.verbose) {
      fmt::print(std::cerr, "# {}: {} calls per rep, s/call:", cases[c].name, calls[c]);
      for (double s : samples[c]) fmt::print(std::cerr, " {:.4g}", s);
      fmt::print(std::cerr, "\n");
    }
  }
  return result;
}

// "target ratio.cuda.add.f32 >= 0.8 x: 0.93 x, met" on stderr, for a full run.
void verdict(const Context& ctx, const std::string& name, double value, double target) {
  if (ctx.options().quick || !ctx.enabled(name) || !std::isfinite(value)) return;
  fmt::print(std::cerr, "thd-bench cuda: target {} >= {:g} x: {:.2f} x, {}\n", name, target, value,
             value >= target ? "met" : "MISSED");
}

// ---- the cuBLAS reference -----------------------------------------------------------

struct LtDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* p) const { cublasLtMatmulDescDestroy(p); }
  void operator()(cublasLtMatrixLayoutOpaque_t* p) const { cublasLtMatrixLayoutDestroy(p); }
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { cublasLtMatmulPreferenceDestroy(p); }
};

// c = a @ b for row-major bfloat16 n x n matrices (computed as c^T = b^T a^T in
// cuBLAS's column-major terms), float32 accumulation, with the best configuration
// found by timing every candidate on this GPU.
class CublasReference {
 public:
  CublasReference(int64_t n, const void* a, const void* b, void* c, cudaStream_t stream)
      : n_(n), a_(a), b_(b), c_(c), stream_(stream) {
    check(cudaMalloc(&workspace_, kWorkspaceBytes), "cudaMalloc(workspace)");
    check(cublasLtCreate(&lt_), "cublasLtCreate");
    check(cublasCreate(&blas_), "cublasCreate");
    check(cublasSetStream(blas_, stream_), "cublasSetStream");
    check(cublasSetWorkspace(blas_, workspace_, kWorkspaceBytes), "cublasSetWorkspace");
    make_descriptors();
    choose();
  }
  ~CublasReference() {
    desc_.reset();
    layout_.reset();
    if (blas_ != nullptr) cublasDestroy(blas_);
    if (lt_ != nullptr) cublasLtDestroy(lt_);
    if (workspace_ != nullptr) cudaFree(workspace_);
  }
  CublasReference(const CublasReference&) = delete;
  CublasReference& operator=(const CublasReference&) = delete;

  void run() const { run_candidate(best_); }
  // Which candidate won, for the diagnostics.
  std::string chosen() const {
    return best_ < 0 ? "cublasGemmEx" : fmt::format("cublasLt heuristic #{}", best_);
  }

 private:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  static constexpr int kCandidates = 8;
  static constexpr int kTrialCalls = 10;

  void make_descriptors() {
    cublasLtMatmulDesc_t desc = nullptr;
    check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    desc_.reset(desc);
    cublasLtMatrixLayout_t layout = nullptr;  // every matrix is n x n with ld n
    const auto un = static_cast<uint64_t>(n_);
    check(cublasLtMatrixLayoutCreate(&layout, CUDA_R_16BF, un, un, n_), "cublasLtMatrixLayoutCreate");
    layout_.reset(layout);
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, LtDeleter> owned(pref);
    const uint64_t ws = kWorkspaceBytes;
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                               sizeof(ws)),
          "cublasLtMatmulPreferenceSetAttribute");
    heuristics_.resize(kCandidates);
    int found = 0;
    check(cublasLtMatmulAlgoGetHeuristic(lt_, desc, layout, layout, layout, layout, pref, kCandidates,
                                         heuristics_.data(), &found),
          "cublasLtMatmulAlgoGetHeuristic");
    heuristics_.resize(static_cast<size_t>(found));
  }

  // -1: cublasGemmEx; i >= 0: the heuristic's i-th algorithm.
  void run_candidate(int i) const {
    const float alpha = 1, beta = 0;
    const int n = static_cast<int>(n_);
    if (i < 0) {
      check(cublasGemmEx(blas_, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, b_, CUDA_R_16BF, n, a_,
                         CUDA_R_16BF, n, &beta, c_, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
      return;
    }
    check(cublasLtMatmul(lt_, desc_.get(), &alpha, b_, layout_.get(), a_, layout_.get(), &beta, c_,
                         layout_.get(), c_, layout_.get(), &heuristics_[static_cast<size_t>(i)].algo,
                         workspace_, kWorkspaceBytes, stream_),
          "cublasLtMatmul");
  }

  void choose() {
    double best_time = std::numeric_limits<double>::infinity();
    for (int i = -1; i < static_cast<int>(heuristics_.size()); ++i) {
      auto body = [&] { run_candidate(i); };
      (void)time_calls(body, 1, stream_);
      const double t = time_calls(body, kTrialCalls, stream_);
      if (t < best_time) {
        best_time = t;
        best_ = i;
      }
    }
  }

  int64_t n_;
  const void* a_;
  const void* b_;
  void* c_;
  cudaStream_t stream_;
  void* workspace_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::unique_ptr<cublasLtMatmulDescOpaque_t, LtDeleter> desc_;
  std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LtDeleter> layout_;
  std::vector<cublasLtMatmulHeuristicResult_t> heuristics_;
  int best_ = -1;
};

void bench_matmul(Context& ctx, cudaStream_t stream) {
  ctx.begin_group("cuda.matmul");
  const int64_t n = ctx.options().quick ? 512 : 8192;
  const std::string sz = std::to_string(n);
  const std::string thd_name = "cuda.matmul.bf16." + sz, ref_name = "ref.cublas.bf16." + sz;
  if (!ctx.enabled(thd_name) && !ctx.enabled(ref_name)) return;
  const Device gpu = Device::cuda(kDevice);
  const Tensor a = Tensor::randn({n, n}, kFloat32).to(kBFloat16).to(gpu);
  const Tensor b = Tensor::randn({n, n}, kFloat32).to(kBFloat16).to(gpu);
  const Tensor c = Tensor::empty({n, n}, kBFloat16, gpu);
  const CublasReference ref(n, a.data_ptr(), b.data_ptr(), c.data_ptr(), stream);
  if (ctx.options().verbose) fmt::print(std::cerr, "# {}: {}\n", ref_name, ref.chosen());
  const std::vector<double> t = time_gpu(ctx, stream, {
      {thd_name, [&] { (void)a.matmul(b); }},
      {ref_name, [&] { ref.run(); }},
  });
  const double tflop = 2.0 * static_cast<double>(n) * n * n / kTera;
  ctx.report(thd_name, tflop / t[0], "TFLOP/s");
  ctx.report(ref_name, tflop / t[1], "TFLOP/s");
  ctx.report("ratio.cuda.matmul.bf16", t[1] / t[0], "x");
  verdict(ctx, "ratio.cuda.matmul.bf16", t[1] / t[0], kMatmulTarget);
}

void bench_add(Context& ctx, cudaStream_t stream) {
  ctx.begin_group("cuda.add");
  const int64_t bytes = ctx.options().quick ? (int64_t{4} << 20) : (int64_t{1} << 30);
  const std::string sz = ctx.options().quick ? "4MiB" : "1GiB";
  const std::string thd_name = "cuda.add.f32." + sz, ref_name = "ref.cuda.d2d_copy." + sz;
  if (!ctx.enabled(thd_name) && !ctx.enabled(ref_name)) return;
  const Device gpu = Device::cuda(kDevice);
  const int64_t n = bytes / 4;
  const Tensor a = Tensor::full({n}, 1.5, kFloat32, gpu);
  const Tensor b = Tensor::full({n}, 2.25, kFloat32, gpu);
  const Tensor dst = Tensor::empty({n}, kFloat32, gpu);
  const std::vector<double> t = time_gpu(ctx, stream, {
      {thd_name, [&] { (void)(a + b); }},
      {ref_name,
       [&] {
         check(cudaMemcpyAsync(dst.data_ptr(), a.data_ptr(), static_cast<size_t>(bytes),
                               cudaMemcpyDeviceToDevice, stream),
               "cudaMemcpyAsync");
       }},
  });
  // Spot-check that the op computed something: one element of a fresh sum.
  if (ctx.enabled(thd_name)) {
    const float got = (a + b).narrow(0, n - 1, 1).cpu().item<float>();
    if (got != 3.75f) throw std::runtime_error(fmt::format("{}: a + b gave {}, expected 3.75", thd_name, got));
  }
  const double gb = static_cast<double>(bytes) / kGiga;
  ctx.report(thd_name, 3 * gb / t[0], "GB/s");
  ctx.report(ref_name, 2 * gb / t[1], "GB/s");
  const double ratio = (3 * gb / t[0]) / (2 * gb / t[1]);
  ctx.report("ratio.cuda.add.f32", ratio, "x");
  verdict(ctx, "ratio.cuda.add.f32", ratio, kAddTarget);
}

void run(Context& ctx) {
  if (!thd::cuda::is_available()) {
    std::cerr << "thd-bench cuda: skipped: no CUDA device\n";
    return;
  }
  check(cudaSetDevice(kDevice), "cudaSetDevice");
  const cudaStream_t stream = thd::cuda::current_stream(kDevice);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, kDevice), "cudaGetDeviceProperties");
  std::cerr << "thd-bench cuda: device " << kDevice << ": " << prop.name << "\n";
  bench_matmul(ctx, stream);
  bench_add(ctx, stream);
}

[[maybe_unused]] const bool registered = register_suite(
    {"cuda", "CUDA tensor ops (bf16 matmul, float32 add) against cuBLAS and a device copy", run});

}  // namespace
}  // namespace thd::bench
