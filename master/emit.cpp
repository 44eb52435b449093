#include "master/emit.h"

#include "tensor/check.h"

namespace thd::master {

const Handle& operand(const DistributedTensor& t, const char* op) {
  if (!t.defined()) THD_THROW(ValueError, op, "the DistributedTensor is undefined (default-constructed or moved from)");
  return *t.handle();
}

std::shared_ptr<Session> session_of(const Handle& h, const char* op) {
  auto s = h.session.lock();
  if (!s) {
    THD_THROW(ValueError, op, "tensor {} belongs to a master-worker session that has ended (thd::shutdown)", h.id);
  }
  return s;
}

void check_same_node(const char* op, std::initializer_list<const Handle*> handles) {
  const Handle* first = *handles.begin();
  for (const Handle* h : handles) {
    if (h->session.lock() != first->session.lock()) {
      THD_THROW(ValueError, op, "tensors {} and {} belong to different master-worker sessions", first->id, h->id);
    }
    if (h->node != first->node) {
      ErrorContext ctx = detail::context_here(op, __FILE__, __LINE__);
      ctx.node = first->node;
      throw ValueError(fmt::format("expected every tensor on one node, but found tensors on node {} and node {}; "
                                   "copy one over first, e.g. t.to_node({})",
                                   first->node, h->node, first->node),
                       ctx);
    }
  }
}

void check_device_supported(Device device, const char* op) {
  if (device.is_cuda()) {
    THD_THROW(ValueError, op, "device {} is not available to DistributedTensors in this build: the workers' CUDA "
                              "support is not built yet; use the CPU (thd::Device::cpu())",
              device.str());
  }
}

}  // namespace thd::master
