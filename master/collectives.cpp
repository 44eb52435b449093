// Collectives issued by the master over tensors on several nodes: one command per
// node; the workers run the DataChannel's collective among themselves, so no tensor
// byte passes through the master.
#include <map>

#include "master/emit.h"
#include "master/infer.h"
#include "tensor/check.h"

namespace thd {

namespace fb = protocol::fb;
using master::Handle;

namespace {

struct Members {
  std::shared_ptr<master::Session> session;
  std::vector<const Handle*> handles;
  std::vector<int> nodes;  // group-rank order = the order of the tensors
};

Members members_of(const char* op, const std::vector<DistributedTensor>& tensors) {
  if (tensors.empty()) THD_THROW(ValueError, op, "expected at least one tensor");
  Members m;
  std::map<int, size_t> seen;  // node -> the tensor on it
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Handle& h = master::operand(tensors[i], op);
    if (i == 0) m.session = master::session_of(h, op);
    else if (h.session.lock() != m.session) THD_THROW(ValueError, op, "tensor {} belongs to another session", i);
    if (const auto [at, fresh] = seen.emplace(h.node, i); !fresh) {
      THD_THROW(ValueError, op,
                "tensors {} and {} are both on node {}: a collective takes one tensor per node (move one with "
                "to_node)",
                at->second, i, h.node);
    }
    const Handle& first = m.handles.empty() ? h : *m.handles.front();
    if (h.meta().dtype() != first.meta().dtype() || h.meta().shape() != first.meta().shape()) {
      THD_THROW(ValueError, op, "tensor {} (node {}) is {} {}, tensor 0 (node {}) is {} {}: every tensor needs one dtype and shape",
                i, h.node, dtype_name(h.meta().dtype()), shape_str(h.meta().shape()), first.node,
                dtype_name(first.meta().dtype()), shape_str(first.meta().shape()));
    }
    m.handles.push_back(&h);
    m.nodes.push_back(h.node);
  }
  return m;
}

void check_reduce_op(const char* op, ReduceOp r, DType dtype) {
  if (r == ReduceOp::Avg && !is_floating_point(dtype)) {
    THD_THROW(TypeError, op, "ReduceOp::Avg needs a floating-point dtype, got {}", dtype_name(dtype));
  }
  if ((r == ReduceOp::BAnd || r == ReduceOp::BOr || r == ReduceOp::BXor) && is_floating_point(dtype)) {
    THD_THROW(TypeError, op, "ReduceOp::{} needs an integer or bool dtype, got {}", reduce_op_name(r), dtype_name(dtype));
  }
}

// One command per member, issued under the cross-node lock (one global order), then
// sent at once: the members block on each other until all have it.
template <typename Build>
void issue(const char* op, const Members& m, Build&& build) {
  std::lock_guard lock(m.session->cross_node_mutex());
  // The same id on every member: the trace draws arrows between them.
  const uint64_t trace_id = m.session->tracing() ? m.session->next_op_id() : 0;
  for (size_t i = 0; i < m.handles.size(); ++i) {
    m.session->link(m.nodes[i], op).append(fb::Op::Collective,
                                           [&](auto& b) { return build(b, i, trace_id).Union(); });
  }
  for (int n : m.nodes) m.session->link(n, op).flush();
}

void in_place(const char* op, const std::vector<DistributedTensor>& tensors, fb::CollectiveKind kind, int root, ReduceOp r) {
  const Members m = members_of(op, tensors);
  check_reduce_op(op, r, m.handles.front()->meta().dtype());
  issue(op, m, [&](auto& b, size_t i, uint64_t trace_id) {
    return fb::CreateCollective(b, kind, m.handles[i]->id, 0, 0, b.CreateVector(m.nodes), root,
                                static_cast<uint8_t>(r), trace_id);
  });
}

size_t check_root(const char* op, size_t root_index, size_t n) {
  if (root_index >= n) THD_THROW(IndexError, op, "root index {} is out of range for {} tensors", root_index, n);
  return root_index;
}

}  // namespace

void all_reduce(const std::vector<DistributedTensor>& tensors, ReduceOp op) {
  in_place("all_reduce", tensors, fb::CollectiveKind::AllReduce, 0, op);
}

void broadcast(const std::vector<DistributedTensor>& tensors, size_t root_index) {
  const int root = static_cast<int>(check_root("broadcast", root_index, tensors.size()));
  in_place("broadcast", tensors, fb::CollectiveKind::Broadcast, root, ReduceOp::Sum);
}

void reduce(const std::vector<DistributedTensor>& tensors, size_t root_index, ReduceOp op) {
  const int root = static_cast<int>(check_root("reduce", root_index, tensors.size()));
  in_place("reduce", tensors, fb::CollectiveKind::Reduce, root, op);
}

namespace {
std::vector<DistributedTensor> with_outputs(const char* op, const std::vector<DistributedTensor>& inputs,
                                            fb::CollectiveKind kind, ReduceOp r) {
  const Members m = members_of(op, inputs);
  const Handle& first = *m.handles.front();
  const auto n = static_cast<int64_t>(m.handles.size());
  Shape out_shape = first.meta().shape();
  if (kind == fb::CollectiveKind::AllGather) {
    out_shape.insert(out_shape.begin(), n);
  } else {
    check_reduce_op(op, r, first.meta().dtype());
    if (out_shape.empty() || out_shape[0] % n != 0) {
      THD_THROW(ShapeError, op, "input shape {} needs a first dim divisible by the {} tensors",
                shape_str(out_shape), n);
    }
    out_shape[0] /= n;
  }
  std::vector<DistributedTensor> outputs;
  for (const Handle* h : m.handles) {
    outputs.emplace_back(m.session->new_handle(h->node, h->device, master::mirror(out_shape, h->meta().dtype())));
  }
  issue(op, m, [&](auto& b, size_t i, uint64_t trace_id) {
    return fb::CreateCollective(b, kind, m.handles[i]->id, outputs[i].id(), b.CreateVector(out_shape),
                                b.CreateVector(m.nodes), 0, static_cast<uint8_t>(r), trace_id);
  });
  return outputs;
}
}  // namespace

std::vector<DistributedTensor> all_gather(const std::vector<DistributedTensor>& inputs) {
  return with_outputs("all_gather", inputs, fb::CollectiveKind::AllGather, ReduceOp::Sum);
}

std::vector<DistributedTensor> reduce_scatter(const std::vector<DistributedTensor>& inputs, ReduceOp op) {
  return with_outputs("reduce_scatter", inputs, fb::CollectiveKind::ReduceScatter, op);
}

}  // namespace thd
