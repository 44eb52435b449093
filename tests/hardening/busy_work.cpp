#include "busy_work.h"

#include <thread>

namespace thd::test {

DistributedTensor queue_matmuls(int count, int64_t n) {
  DistributedTensor m = DistributedTensor::ones({n, n});
  DistributedTensor acc = m.clone();
  // Dividing by n keeps the values at 1: the result is checkable and never overflows.
  for (int i = 0; i < count; ++i) acc = acc.mm(m).div(static_cast<double>(n));
  return acc;
}

uint64_t queued_on(const NodeStats& node, const Stream& stream) {
  for (const StreamStats& s : node.streams) {
    if (s.stream == stream.id()) return s.queued_ops;
  }
  return 0;
}

bool poll_stats(const std::function<bool(const std::vector<NodeStats>&)>& ready, std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    if (ready(stats())) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace thd::test
