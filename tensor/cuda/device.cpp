// thd::cuda::device_count, is_available and synchronize in a build with CUDA (the
// build without has its own in tensor/device.cpp).
#include <thd/cuda.h>

#include <mutex>
#include <optional>
#include <vector>

#include "tensor/check.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/cuda_stream.h"

namespace thd::cuda {

int device_count() {
  // Counted once: the devices a process sees cannot change while it runs, and the
  // count is asked on every CUDA allocation.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      // No driver or no GPU: not an error here, just no devices. Clear the error so
      // the next checked CUDA call does not report it.
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

bool is_available() { return device_count() > 0; }

void synchronize(int device) {
  const int n = device_count();
  THD_CHECK(device >= -1 && device < n, ValueError, "synchronize",
            "device cuda:{} is out of range ({} CUDA devices)", device, n);
  for (int d = device < 0 ? 0 : device; d < (device < 0 ? n : device + 1); ++d) {
    DeviceGuard guard(d);
    THD_CUDA_CHECK(cudaDeviceSynchronize(), "synchronize");
  }
}

std::array<uint8_t, 16> device_uuid(int device) {
  const int n = device_count();
  THD_CHECK(device >= 0 && device < n, ValueError, "device_uuid", "device cuda:{} is out of range ({} CUDA devices)",
            device, n);
  // Read once per device: cudaGetDeviceProperties reads every attribute, and a
  // worker asks at each collective of GPU tensors.
  // Never destroyed: a collective may still ask while the process exits.
  static auto* mu = new std::mutex;
  static auto* known = new std::vector<std::optional<std::array<uint8_t, 16>>>(static_cast<size_t>(n));
  std::lock_guard lock(*mu);
  auto& uuid = (*known)[static_cast<size_t>(device)];
  if (!uuid) {
    cudaDeviceProp prop{};
    THD_CUDA_CHECK(cudaGetDeviceProperties(&prop, device), "device_uuid");
    static_assert(sizeof(prop.uuid.bytes) == 16);
    std::array<uint8_t, 16> bytes{};
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(prop.uuid.bytes[i]);
    uuid = bytes;
  }
  return *uuid;
}

}  // namespace thd::cuda
