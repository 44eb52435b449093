// thd::cuda::device_count, is_available and synchronize in a build with CUDA (the
// build without has its own in tensor/device.cpp).
#include <thd/cuda.h>

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

}  // namespace thd::cuda
