#include "tensor/cuda/gemm.h"

#include <cublasLt.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "tensor/cuda/blas_handle.h"

namespace thd::cuda {
namespace {

bool is_16bit(cudaDataType_t t) { return t == CUDA_R_16F || t == CUDA_R_16BF; }

// RAII for the cublasLt descriptors of one call. They are host objects, cheap to
// make; only the algorithm search is worth caching.
struct MatmulDescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { cublasLtMatmulDescDestroy(d); }
};
struct LayoutDeleter {
  void operator()(cublasLtMatrixLayoutOpaque_t* d) const { cublasLtMatrixLayoutDestroy(d); }
};
struct PreferenceDeleter {
  void operator()(cublasLtMatmulPreferenceOpaque_t* d) const {
    cublasLtMatmulPreferenceDestroy(d);
  }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, MatmulDescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LayoutDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PreferenceDeleter>;

template <typename T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, T value,
              const char* op) {
  THD_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof(value)), op);
}
template <typename T>
void set_layout(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, T value,
                const char* op) {
  THD_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, attr, &value, sizeof(value)), op);
}
template <typename T>
void set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, T value,
              const char* op) {
  THD_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &value, sizeof(value)), op);
}

// Layout of a rows x cols column-major matrix with leading dim ld, batched.
Layout make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t count,
                   int64_t stride, const char* op) {
  cublasLtMatrixLayout_t raw = nullptr;
  THD_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, type, static_cast<uint64_t>(rows),
                                              static_cast<uint64_t>(cols), ld),
                   op);
  Layout l(raw);
  if (count > 1) {
    set_layout(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<int32_t>(count), op);
    set_layout(raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride, op);
  }
  return l;
}

// Largest power of two up to 256 that divides the address: what cublasLt's
// alignment preferences ask for.
uint32_t alignment(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 1;
  while (a < 256 && addr % (a * 2) == 0) a *= 2;
  return a;
}

// The problem as the heuristic sees it, alignment and device included.
using LtKey = std::array<int64_t, 17>;

struct LtKeyHash {
  size_t operator()(const LtKey& k) const {
    size_t h = 0;
    for (int64_t v : k) h = h * 1000003u ^ std::hash<int64_t>{}(v);
    return h;
  }
};

struct LtChoice {
  bool found = false;
  cublasLtMatmulAlgo_t algo{};
};

// The heuristic's answer per problem. A model runs a handful of shapes again and
// again; the cap only bounds a pathological stream of distinct shapes. Never freed
// (see blas_handle.h).
class LtAlgoCache {
 public:
  static LtAlgoCache& instance() {
    static auto* cache = new LtAlgoCache;
    return *cache;
  }

  bool find(const LtKey& key, LtChoice* out) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    *out = it->second;
    return true;
  }

  void put(const LtKey& key, const LtChoice& choice) {
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.size() >= kMaxEntries) map_.clear();
    map_[key] = choice;
  }

 private:
  static constexpr size_t kMaxEntries = 4096;
  std::mutex mu_;
  std::unordered_map<LtKey, LtChoice, LtKeyHash> map_;
};

// cublasLt for a 16-bit GEMM; false when it has no algorithm for this problem.
bool lt_gemm(const GemmProblem& p, const void* a, const void* b, void* c, const GemmScales& s,
             int device, cudaStream_t stream, const char* op) {
  cublasLtMatmulDesc_t raw_desc = nullptr;
  THD_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), op);
  MatmulDesc desc(raw_desc);
  set_desc(raw_desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(p.trans_a), op);
  set_desc(raw_desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(p.trans_b), op);
  const bool na = p.trans_a == CUBLAS_OP_N;
  const bool nb = p.trans_b == CUBLAS_OP_N;
  Layout la = make_layout(p.type, na ? p.m : p.k, na ? p.k : p.m, p.lda, p.count, p.stride_a, op);
  Layout lb = make_layout(p.type, nb ? p.k : p.n, nb ? p.n : p.k, p.ldb, p.count, p.stride_b, op);
  Layout lc = make_layout(p.type, p.m, p.n, p.ldc, p.count, p.stride_c, op);

  const uint32_t align_a = alignment(a), align_b = alignment(b), align_c = alignment(c);
  const LtKey key{device,    p.type,   p.trans_a,  p.trans_b,  p.m,        p.n,
                  p.k,       p.lda,    p.ldb,      p.ldc,      p.stride_a, p.stride_b,
                  p.stride_c, p.count, align_a,    align_b,    align_c};
  LtChoice choice;
  cublasLtHandle_t lt = blaslt_handle(device, op);
  if (!LtAlgoCache::instance().find(key, &choice)) {
    cublasLtMatmulPreference_t raw_pref = nullptr;
    THD_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref), op);
    Preference pref(raw_pref);
    set_pref(raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
             static_cast<uint64_t>(kBlasWorkspaceBytes), op);
    set_pref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a, op);
    set_pref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b, op);
    set_pref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c, op);
    set_pref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c, op);
    // Split-K partial sums added in float32, never in the 16-bit output type, so the
    // result is rounded once (as on the CPU).
    set_pref(raw_pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
             static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE), op);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
        lt, raw_desc, la.get(), lb.get(), lc.get(), lc.get(), raw_pref, 1, &result, &found);
    // NOT_SUPPORTED: no algorithm for this problem; cublasGemmEx takes it.
    if (st != CUBLAS_STATUS_NOT_SUPPORTED) THD_CUBLAS_CHECK(st, op);
    choice.found = st == CUBLAS_STATUS_SUCCESS && found > 0;
    if (choice.found) choice.algo = result.algo;
    LtAlgoCache::instance().put(key, choice);
  }
  if (!choice.found) return false;
  const BlasWorkspace ws = blas_workspace(device, stream);
  THD_CUBLAS_CHECK(cublasLtMatmul(lt, raw_desc, &s.alpha_f, a, la.get(), b, lb.get(), &s.beta_f, c,
                                  lc.get(), c, lc.get(), &choice.algo, ws.data, ws.bytes, stream),
                   op);
  return true;
}

void gemm_ex(const GemmProblem& p, const void* a, const void* b, void* c, const GemmScales& s,
             int device, cudaStream_t stream, const char* op) {
  const bool f64 = p.type == CUDA_R_64F;
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const void* alpha = f64 ? static_cast<const void*>(&s.alpha_d) : &s.alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&s.beta_d) : &s.beta_f;
  cublasHandle_t h = blas_handle(device, stream, op);
  const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
  const int lda = static_cast<int>(p.lda), ldb = static_cast<int>(p.ldb);
  const int ldc = static_cast<int>(p.ldc);
  if (p.count == 1) {
    THD_CUBLAS_CHECK(cublasGemmEx(h, p.trans_a, p.trans_b, m, n, k, alpha, a, p.type, lda, b,
                                  p.type, ldb, beta, c, p.type, ldc, compute, CUBLAS_GEMM_DEFAULT),
                     op);
  } else {
    THD_CUBLAS_CHECK(
        cublasGemmStridedBatchedEx(h, p.trans_a, p.trans_b, m, n, k, alpha, a, p.type, lda,
                                   p.stride_a, b, p.type, ldb, p.stride_b, beta, c, p.type, ldc,
                                   p.stride_c, static_cast<int>(p.count), compute,
                                   CUBLAS_GEMM_DEFAULT),
        op);
  }
}

}  // namespace

void gemm(const GemmProblem& p, const void* a, const void* b, void* c, const GemmScales& s,
          int device, cudaStream_t stream, const char* op) {
  if (is_16bit(p.type) && lt_gemm(p, a, b, c, s, device, stream, op)) return;
  gemm_ex(p, a, b, c, s, device, stream, op);
}

}  // namespace thd::cuda
