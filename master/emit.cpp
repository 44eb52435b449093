#include "master/emit.h"

#include "master/graph.h"

#include "tensor/check.h"
#include "tensor/op_util.h"

namespace thd::master {

const Handle& operand(const DistributedTensor& t, const char* op) {
  if (!t.defined()) THD_THROW(ValueError, op, "the DistributedTensor is undefined (default-constructed or moved from)");
  // A tensor a captured op names lives as long as the graph (an input the program
  // drops stays on its node for the replays).
  if (Capture* capture = Capture::active()) capture->use(t.handle());
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
  // Handles of one session share its control block: comparing owners takes no
  // reference (locking both would, per handle and per op).
  auto same_session = [&](const Handle* h) {
    return (!h->session.owner_before(first->session) && !first->session.owner_before(h->session)) ||
           h->session.lock() == first->session.lock();
  };
  for (const Handle* h : handles) {
    if (h != first && !same_session(h)) {
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

void check_same_device(const char* op, std::initializer_list<const Handle*> handles) {
  const Handle* first = *handles.begin();
  for (const Handle* h : handles) {
    if (h->device != first->device) {
      detail::check_same_device(op, {&first->meta(), &h->meta()});  // throws the library's error
    }
  }
}

void check_device_valid(Device device, const char* op) {
  if (device.is_cuda() && device.index() < 0) {
    THD_THROW(ValueError, op, "device {} has a negative index: GPUs of a node are cuda:0..cuda:N-1", device.str());
  }
  if (device.is_cuda() && device.index() > protocol::kMaxDeviceIndex) {
    THD_THROW(ValueError, op, "device {} has an index past {}: no node has that many GPUs", device.str(),
              protocol::kMaxDeviceIndex);
  }
}

}  // namespace thd::master
