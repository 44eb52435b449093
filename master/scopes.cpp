// NodeScope and DeviceScope: thread-local placement for new tensors, restored in
// reverse order as scopes close (nesting).
#include <utility>
#include <vector>

#include "master/emit.h"
#include "master/stream_handle.h"
#include "tensor/check.h"

namespace thd {

namespace {
thread_local int t_node = 0;
thread_local Device t_device = Device::cpu();
// StreamScopes, innermost last: usually empty, so an op pays one test.
thread_local std::vector<std::shared_ptr<master::StreamHandle>> t_streams;
}  // namespace

NodeScope::NodeScope(int node) : previous_(t_node) {
  if (node < 0) THD_THROW(IndexError, "NodeScope", "node {} is negative: nodes are numbered 0..N-1", node);
  t_node = node;
}
NodeScope::~NodeScope() { t_node = previous_; }

DeviceScope::DeviceScope(Device device) : previous_(t_device) {
  master::check_device_valid(device, "DeviceScope");
  t_device = device;
}
DeviceScope::~DeviceScope() { t_device = previous_; }

int current_node() { return t_node; }
Device current_device() { return t_device; }

namespace master {
int scoped_node() { return t_node; }
Device scoped_device() { return t_device; }

int exchange_scoped_node(int node) { return std::exchange(t_node, node); }

std::shared_ptr<StreamHandle> scoped_stream_handle(int node) {
  for (auto it = t_streams.rbegin(); it != t_streams.rend(); ++it) {
    if ((*it)->node == node) return *it;
  }
  return nullptr;
}

uint32_t scoped_stream(int node) {
  if (t_streams.empty()) return 0;
  for (auto it = t_streams.rbegin(); it != t_streams.rend(); ++it) {
    if ((*it)->node == node) return (*it)->id;
  }
  return 0;
}

void push_stream_scope(std::shared_ptr<StreamHandle> stream) { t_streams.push_back(std::move(stream)); }
void pop_stream_scope() {
  if (!t_streams.empty()) t_streams.pop_back();
}
}  // namespace master

}  // namespace thd
