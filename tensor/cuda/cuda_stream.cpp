#include "tensor/cuda/cuda_stream.h"

#include <array>
#include <mutex>
#include <utility>
#include <vector>

#include "tensor/check.h"
#include "tensor/cuda/cuda_check.h"

namespace thd::cuda {
namespace {

// More devices than any node has; a fixed array keeps current_stream() a load from
// thread-local storage, with no allocation on a thread's first op.
constexpr int kMaxDevices = 64;

// This thread's current stream per device; null is the legacy default stream.
thread_local std::array<cudaStream_t, kMaxDevices> t_current_streams{};
// Where streams come from when no StreamGuard names one (null: the legacy stream).
thread_local StreamSource* t_source = nullptr;

// Streams handed back, per device and priority, for the next acquire.
struct StreamPool {
  std::mutex mu;
  std::array<std::array<std::vector<cudaStream_t>, 2>, kMaxDevices> free;
};

StreamPool& stream_pool() {
  static auto* pool = new StreamPool;  // never destroyed: streams outlive static destructors
  return *pool;
}

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
  cudaStream_t s = t_current_streams[static_cast<size_t>(device)];
  if (s == nullptr && t_source != nullptr) s = t_source->stream_for(device);
  return s;
}

StreamSource* exchange_stream_source(StreamSource* source) { return std::exchange(t_source, source); }

StreamSourceScope::StreamSourceScope(StreamSource* source) : previous_(exchange_stream_source(source)) {}

StreamSourceScope::~StreamSourceScope() { exchange_stream_source(previous_); }

cudaStream_t acquire_pooled_stream(int device, bool high_priority) {
  check_index(device, "acquire_pooled_stream");
  StreamPool& pool = stream_pool();
  {
    std::lock_guard lock(pool.mu);
    auto& free = pool.free[static_cast<size_t>(device)][high_priority ? 1 : 0];
    if (!free.empty()) {
      cudaStream_t s = free.back();
      free.pop_back();
      return s;
    }
  }
  DeviceGuard on(device);
  int least = 0, greatest = 0;  // numerically: greatest priority is the lowest number
  THD_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest), "acquire_pooled_stream");
  cudaStream_t s = nullptr;
  THD_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamDefault, high_priority ? greatest : least),
                 "acquire_pooled_stream");
  return s;
}

void release_pooled_stream(int device, cudaStream_t stream, bool high_priority) {
  if (stream == nullptr || device < 0 || device >= kMaxDevices) return;
  StreamPool& pool = stream_pool();
  std::lock_guard lock(pool.mu);
  pool.free[static_cast<size_t>(device)][high_priority ? 1 : 0].push_back(stream);
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
