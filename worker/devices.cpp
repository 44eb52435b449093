#include "worker/devices.h"

#include <mutex>
#include <vector>

#include <thd/config.h>
#include <thd/cuda.h>

#include "tensor/check.h"

#if THD_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace thd::worker {

int cuda_device_count() { return cuda::device_count(); }

void check_device(int node, Device device, const std::string& op) {
  if (device.is_cpu()) return;
  const int n = cuda_device_count();
  if (device.index() >= 0 && device.index() < n) return;
  const std::string has = n == 0 ? std::string(THD_WITH_CUDA ? "0 GPUs (no CUDA device is visible to it)"
                                                             : "0 GPUs (it was built without CUDA)")
                                 : fmt::format("{} GPU{} (cuda:0..cuda:{})", n, n == 1 ? "" : "s", n - 1);
  THD_THROW(ValueError, op, "node {} has no device {}: its worker has {}", node, device.str(), has);
}

size_t device_total_memory(int index) {
#if THD_WITH_CUDA
  // Asked once per device: a GPU's memory does not change while the process runs.
  static std::mutex mu;
  static std::vector<size_t> known;
  std::lock_guard lock(mu);
  if (index < 0 || index >= cuda_device_count()) return 0;
  if (known.empty()) known.assign(static_cast<size_t>(cuda_device_count()), 0);
  size_t& total = known[static_cast<size_t>(index)];
  if (total == 0) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, index) == cudaSuccess) {
      total = prop.totalGlobalMem;
    } else {
      (void)cudaGetLastError();  // not sticky: leave no error for the next checked call
    }
  }
  return total;
#else
  (void)index;
  return 0;
#endif
}

}  // namespace thd::worker
