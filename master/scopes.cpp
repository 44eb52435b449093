// NodeScope and DeviceScope: thread-local placement for new tensors, restored in
// reverse order as scopes close (nesting).
#include "master/emit.h"
#include "tensor/check.h"

namespace thd {

namespace {
thread_local int t_node = 0;
thread_local Device t_device = Device::cpu();
}  // namespace

NodeScope::NodeScope(int node) : previous_(t_node) {
  if (node < 0) THD_THROW(IndexError, "NodeScope", "node {} is negative: nodes are numbered 0..N-1", node);
  t_node = node;
}
NodeScope::~NodeScope() { t_node = previous_; }

DeviceScope::DeviceScope(Device device) : previous_(t_device) { t_device = device; }
DeviceScope::~DeviceScope() { t_device = previous_; }

int current_node() { return t_node; }
Device current_device() { return t_device; }

namespace master {
int scoped_node() { return t_node; }
Device scoped_device() { return t_device; }
}  // namespace master

}  // namespace thd
