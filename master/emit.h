// What every DistributedTensor op does on the master: check its operands (defined,
// one session, one node), make the output's handle and mirror, and append the
// command to the node's buffer.
#pragma once

#include <initializer_list>
#include <memory>
#include <utility>

#include <thd/distributed.h>

#include "master/handle.h"
#include "master/session.h"

namespace thd::master {

// The handle of an operand: ValueError for an undefined tensor or one of a session
// that has ended.
const Handle& operand(const DistributedTensor& t, const char* op);
std::shared_ptr<Session> session_of(const Handle& h, const char* op);
// ValueError naming both nodes and the fix (to_node) when the operands differ.
void check_same_node(const char* op, std::initializer_list<const Handle*> handles);
// The tensor library's own error (ValueError "expected all tensors on one device")
// when the operands are on different devices of their node: what the worker would
// raise, raised at the call site.
void check_same_device(const char* op, std::initializer_list<const Handle*> handles);

// A new tensor `meta` on `node` (on meta's device), made by the command `build`
// returns (given the new tensor's id).
template <typename Build>
DistributedTensor emit_new(Session& s, const char* op, int node, Tensor meta, fb::Op type, Build&& build) {
  NodeLink& link = s.link(node, op);
  const Device device = meta.device();
  auto h = s.new_handle(node, device, std::move(meta));
  const uint64_t id = h->id;
  link.append(type, [&](NodeLink::Builder& b) { return build(b, id); });
  return DistributedTensor(std::move(h));
}

// As emit_new, for an elementwise command (its `out` set here to the new tensor's
// id). `meta`: the result's mirror on `device`, or the FreshMeta of a result whose
// mirror is made on first use.
template <typename Meta>
DistributedTensor emit_elementwise(Session& s, const char* op, int node, Device device, Meta&& meta,
                                   protocol::ElementwiseCommand command) {
  NodeLink& link = s.link(node, op);
  auto h = s.new_handle(node, device, std::forward<Meta>(meta));
  command.out = h->id;
  link.append_elementwise(command);
  return DistributedTensor(std::move(h));
}

// A command that writes an existing tensor (in-place ops).
template <typename Build>
void emit_inplace(Session& s, const char* op, const Handle& target, fb::Op type, Build&& build) {
  s.link(target.node, op).append(type, [&](NodeLink::Builder& b) { return build(b); });
}

// Runs a call-site check or inference for an op on `node`: an error it raises
// names the node.
template <typename F>
decltype(auto) at_node(int node, F&& f) {
  try {
    return f();
  } catch (Error& e) {
    if (e.context().node < 0) e.set_node(node);
    throw;
  }
}

// The node and device new tensors go to on this thread (scopes.cpp).
int scoped_node();
Device scoped_device();
// ValueError for a device no node can have (a negative CUDA index). Whether a node
// has the GPU is for its worker to say (a RemoteError naming what it has).
void check_device_valid(Device device, const char* op);

}  // namespace thd::master
