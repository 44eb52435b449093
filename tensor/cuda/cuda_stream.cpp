#include "tensor/cuda/cuda_stream.h"

#include <array>

#include "tensor/check.h"
#include "tensor/cuda/cuda_check.h"

namespace thd::cuda {
namespace {

// More devices than any node has; a fixed array keeps current_stream() a load from
// thread-local storage, with no allocation on a thread's first op.
constexpr int kMaxDevices = 64;

// This thread's current stream per device; null is the legacy default stream.
thread_local std::array<cudaStream_t, kMaxDevices> t_current_streams{};

void check_index(int device, const char* op) {
  THD_CHECK(device >= 0 && device < kMaxDevices, ValueError, op,
            "CUDA device index {} is out of range [0, {})", device, kMaxDevices);
}

int get_device(const char* op) {
  int d = 0;
  THD_CUDA_CHECK(cudaGetDevice(&d), op);
  return d;
}

}  // namespace

cudaStream_t current_stream(int device) {
  check_index(device, "current_stream");
  return t_current_streams[static_cast<size_t>(device)];
}

StreamGuard::StreamGuard(int device, cudaStream_t stream)
    : device_(device), previous_device_(get_device("StreamGuard")) {
  check_index(device, "StreamGuard");
  if (previous_device_ != device) THD_CUDA_CHECK(cudaSetDevice(device), "StreamGuard");
  previous_stream_ = t_current_streams[static_cast<size_t>(device)];
  t_current_streams[static_cast<size_t>(device)] = stream;
}

StreamGuard::~StreamGuard() {
  t_current_streams[static_cast<size_t>(device_)] = previous_stream_;
  int now = 0;
  // A destructor cannot report a failure; cudaSetDevice to a device that was current
  // before does not fail short of a driver shutting down.
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_device_) {
    (void)cudaSetDevice(previous_device_);
  }
}

DeviceGuard::DeviceGuard(int device) : previous_(get_device("DeviceGuard")) {
  if (previous_ != device) THD_CUDA_CHECK(cudaSetDevice(device), "DeviceGuard");
}

DeviceGuard::~DeviceGuard() {
  int now = 0;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
}

}  // namespace thd::cuda
