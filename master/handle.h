// The master's side of one remote tensor: its id, where it lives, and a metadata
// mirror (dtype, shape, strides, offset) kept as a thd::Tensor over placeholder
// storage, so views are computed by the tensor library itself, exactly as the
// worker will compute them. The mirror's bytes are never read or written.
#pragma once

#include <cstdint>
#include <memory>

#include <thd/device.h>
#include <thd/tensor.h>

namespace thd::master {

class Session;

struct Handle {
  Handle(std::weak_ptr<Session> session, uint64_t id, int node, Device device, Tensor meta)
      : session(std::move(session)), id(id), node(node), device(device), meta(std::move(meta)) {}
  // The last reference queues a lazy Free on the node (nothing when the session
  // has ended: the worker freed everything then).
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  std::weak_ptr<Session> session;
  const uint64_t id;
  const int node;
  const Device device;
  const Tensor meta;
};

// A contiguous metadata mirror of `shape` and `dtype` (views of it are mirrors too).
Tensor mirror(const Shape& shape, DType dtype);

}  // namespace thd::master
