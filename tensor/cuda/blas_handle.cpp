#include "tensor/cuda/blas_handle.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <thd/error.h>
#include <thd/tensor.h>

#include "tensor/check.h"

namespace thd::cuda {

namespace detail {

void throw_cublas_error(cublasStatus_t status, const char* call, const char* op, const char* file,
                        int line) {
  std::string message = fmt::format("{}: {} (in {})", cublasGetStatusName(status),
                                    cublasGetStatusString(status), call);
  ErrorContext ctx = thd::detail::context_here(op, file, line);
  if (status == CUBLAS_STATUS_ALLOC_FAILED) {
    throw OutOfMemoryError(std::move(message), std::move(ctx));
  }
  throw CudaError(std::move(message), std::move(ctx));
}

}  // namespace detail

namespace {

// Idle handles of one kind, per device. Never freed (see blas_handle.h), so threads
// exiting during static destruction can still give theirs back.
template <typename Handle>
class HandlePool {
 public:
  using Create = Handle (*)(const char* op);

  Handle acquire(int device, Create create, const char* op) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<Handle>& idle = idle_[device];
      if (!idle.empty()) {
        Handle h = idle.back();
        idle.pop_back();
        return h;
      }
    }
    return create(op);  // outside the lock: cublasCreate takes milliseconds
  }

  void release(int device, Handle h) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_[device].push_back(h);
  }

  static HandlePool& instance() {
    static auto* pool = new HandlePool;
    return *pool;
  }

 private:
  std::mutex mu_;
  std::map<int, std::vector<Handle>> idle_;
};

// One thread's leased handle of one kind per device, returned to the pool when the
// thread ends. A cuBLAS handle remembers the stream it was last bound to, so a thread
// issuing to one stream rebinds nothing, and holds that binding's workspace.
template <typename Handle>
class ThreadHandles {
 public:
  struct Lease {
    int device;
    Handle handle;
    cudaStream_t bound = nullptr;
    BlasWorkspace workspace;  // owner undefined while unbound
  };

  ~ThreadHandles() {
    for (const Lease& l : leases_) HandlePool<Handle>::instance().release(l.device, l.handle);
  }

  Lease& get(int device, typename HandlePool<Handle>::Create create, const char* op) {
    for (Lease& l : leases_) {
      if (l.device == device) return l;
    }
    Handle h = HandlePool<Handle>::instance().acquire(device, create, op);
    leases_.push_back({device, h, nullptr, {}});
    return leases_.back();
  }

 private:
  std::vector<Lease> leases_;
};

cublasHandle_t create_blas_handle(const char* op) {
  cublasHandle_t h = nullptr;
  THD_CUBLAS_CHECK(cublasCreate(&h), op);
  // Default math (no TF32) with split-K reductions in the compute type.
  THD_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION), op);
  return h;
}

cublasLtHandle_t create_blaslt_handle(const char* op) {
  cublasLtHandle_t h = nullptr;
  THD_CUBLAS_CHECK(cublasLtCreate(&h), op);
  return h;
}

}  // namespace

BlasWorkspace blas_workspace(int device, cudaStream_t stream) {
  struct Cached {
    Tensor buffer;
    uint64_t last_use;
  };
  // Never destroyed (see blas_handle.h): at exit the allocator must not be called
  // from a static destructor.
  static std::mutex mu;
  static auto* cache = new std::map<std::pair<int, cudaStream_t>, Cached>;
  static uint64_t clock = 0;
  constexpr size_t kMaxCached = 16;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find({device, stream});
  if (it == cache->end()) {
    if (cache->size() >= kMaxCached) {
      // The least recently used goes; whoever still holds it keeps it alive.
      auto oldest = cache->begin();
      for (auto c = cache->begin(); c != cache->end(); ++c) {
        if (c->second.last_use < oldest->second.last_use) oldest = c;
      }
      cache->erase(oldest);
    }
    Tensor buffer =
        Tensor::empty({static_cast<int64_t>(kBlasWorkspaceBytes)}, kUInt8, Device::cuda(device));
    it = cache->emplace(std::make_pair(device, stream), Cached{std::move(buffer), 0}).first;
  }
  it->second.last_use = ++clock;
  return {it->second.buffer, it->second.buffer.data_ptr(), kBlasWorkspaceBytes};
}

cublasHandle_t blas_handle(int device, cudaStream_t stream, const char* op) {
  thread_local ThreadHandles<cublasHandle_t> handles;
  auto& lease = handles.get(device, create_blas_handle, op);
  if (!lease.workspace.owner.defined() || lease.bound != stream) {
    BlasWorkspace ws = blas_workspace(device, stream);
    // cublasSetStream resets the workspace to cuBLAS's own, so the workspace follows.
    lease.workspace = BlasWorkspace{};
    THD_CUBLAS_CHECK(cublasSetStream(lease.handle, stream), op);
    THD_CUBLAS_CHECK(cublasSetWorkspace(lease.handle, ws.data, ws.bytes), op);
    lease.bound = stream;
    lease.workspace = std::move(ws);
  }
  return lease.handle;
}

cublasLtHandle_t blaslt_handle(int device, const char* op) {
  thread_local ThreadHandles<cublasLtHandle_t> handles;
  return handles.get(device, create_blaslt_handle, op).handle;
}

}  // namespace thd::cuda
