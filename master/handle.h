// The master's side of one remote tensor: its id, where it lives, and a metadata
// mirror (dtype, shape, strides, offset, device) kept as a thd::Tensor over a meta
// storage of the remote tensor's size and device (no bytes: docs/tensor.md), so
// views are computed by the tensor library itself, exactly as the worker will
// compute them, and its device checks see the remote device. An op that would
// read or write the mirror's elements throws NotImplementedError naming the op.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <thd/device.h>
#include <thd/tensor.h>

namespace thd::master {

class Session;

struct Handle {
  // `meta` is moved to `device` when it is not there already.
  Handle(std::weak_ptr<Session> session, uint64_t id, int node, Device device, Tensor meta);
  // The last reference queues a lazy Free on the node (nothing when the session
  // has ended: the worker freed everything then).
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  std::weak_ptr<Session> session;
  const uint64_t id;
  const int node;
  const Device device;
  const Tensor meta;  // meta.device() == device
  // Never made on its node (created in a graph capture that was discarded, or by a
  // graph reset before its first replay): its release sends no Free.
  std::atomic<bool> never_made{false};
};

// A contiguous metadata mirror of `shape` and `dtype` on `device` (views of it are
// mirrors too). ValueError naming `op` for a negative size, or a tensor whose bytes
// would not fit in int64 (no node could hold it).
Tensor mirror(const Shape& shape, DType dtype, Device device = Device::cpu(), const char* op = "tensor");
// `meta` (a mirror, or a view of one) with the same metadata on `device`.
Tensor on_device(Tensor meta, Device device);

}  // namespace thd::master
