#include <thd/config.h>
#include <thd/cuda.h>
#include <thd/device.h>

#include "tensor/check.h"
#include "tensor/storage_alloc.h"

namespace thd {

std::string Device::str() const {
  if (is_cpu()) return "cpu";
  return "cuda:" + std::to_string(index_);
}

std::ostream& operator<<(std::ostream& os, Device d) { return os << d.str(); }

namespace detail {

void check_device_available(Device device, const char* op) {
  if (device.is_cpu()) return;
#if THD_WITH_CUDA
  const int n = cuda::device_count();
  THD_CHECK(device.index() >= 0 && device.index() < n, ValueError, op,
            "device {} is out of range ({} CUDA devices)", device.str(), n);
#else
  THD_THROW(NotImplementedError, op,
            "device {} needs CUDA, and this build has none (built with THD_WITH_CUDA=OFF)",
            device.str());
#endif
}

}  // namespace detail

#if !THD_WITH_CUDA
// Without CUDA there are no devices (tensor/cuda/device.cpp has the real ones).
namespace cuda {

int device_count() { return 0; }

bool is_available() { return false; }

void synchronize(int /*device*/) {
  THD_THROW(NotImplementedError, "synchronize",
            "CUDA is not available: this build has none (built with THD_WITH_CUDA=OFF)");
}

std::array<uint8_t, 16> device_uuid(int /*device*/) {
  THD_THROW(NotImplementedError, "device_uuid",
            "CUDA is not available: this build has none (built with THD_WITH_CUDA=OFF)");
}

}  // namespace cuda
#endif

}  // namespace thd
