#include "tensor/cuda/event_pool.h"

#include <memory>
#include <mutex>
#include <vector>

#include <thd/cuda.h>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/cuda_stream.h"

namespace thd::cuda::detail {
namespace {

struct DeviceEvents {
  std::mutex mu;
  std::vector<cudaEvent_t> free[2];  // without, with timing
};

// One list per device, sized once: device_count() cannot change in a process.
std::vector<std::unique_ptr<DeviceEvents>>& lists() {
  static auto* l = [] {
    auto* v = new std::vector<std::unique_ptr<DeviceEvents>>();
    for (int d = 0; d < device_count(); ++d) v->push_back(std::make_unique<DeviceEvents>());
    return v;
  }();
  return *l;
}

}  // namespace

EventPool& EventPool::instance() {
  static EventPool pool;
  return pool;
}

cudaEvent_t EventPool::acquire(int device, bool timing) {
  DeviceEvents& l = *lists().at(static_cast<size_t>(device));
  std::vector<cudaEvent_t>& free = l.free[timing ? 1 : 0];
  {
    std::lock_guard lock(l.mu);
    if (!free.empty()) {
      cudaEvent_t e = free.back();
      free.pop_back();
      return e;
    }
  }
  DeviceGuard guard(device);
  cudaEvent_t e = nullptr;
  THD_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming), "allocate");
  return e;
}

void EventPool::release(int device, cudaEvent_t event, bool timing) noexcept {
  DeviceEvents& l = *lists()[static_cast<size_t>(device)];
  std::lock_guard lock(l.mu);
  try {
    l.free[timing ? 1 : 0].push_back(event);
  } catch (...) {
    // Out of host memory: the event leaks, which costs less than failing a free.
  }
}

}  // namespace thd::cuda::detail
