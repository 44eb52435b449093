// DistributedTensor: metadata, creation, and moving data (get, from, to_node).
#include <cmath>
#include <sstream>

#include "master/emit.h"
#include "master/graph.h"
#include "master/infer.h"
#include "tensor/check.h"

namespace thd {

using master::emit_new;
using master::operand;
using master::session_of;
namespace fb = protocol::fb;

namespace {

// The node and device a new tensor goes to: the scopes', unless the call names a
// device.
// A node named by the call (dist_send's) is checked as the call's, not as a scope's.
std::shared_ptr<master::Session> placement(const char* op, std::optional<Device> explicit_device, int& node,
                                           Device& device, std::optional<int> explicit_node = std::nullopt) {
  auto s = master::current_session(op);
  node = explicit_node.value_or(master::scoped_node());
  device = explicit_device.value_or(master::scoped_device());
  master::check_device_valid(device, op);
  (void)s->link(node, op);  // a node out of range throws here, naming the range
  return s;
}

// The arguments of a Create beyond its kind, shape and dtype.
struct CreateArgs {
  Scalar value = 0;
  Scalar start = 0, end = 0, step = 0;
  int64_t steps = 0;
  int64_t rows = 0, cols = 0;
};

DistributedTensor create(const char* op, const Shape& shape, DType dtype, std::optional<Device> on,
                         fb::CreateKind kind, const CreateArgs& args = {}) {
  int node;
  Device device;
  auto s = placement(op, on, node, device);
  for (int64_t d : shape) {
    if (d < 0) THD_THROW(ValueError, op, "negative size in shape {}", shape_str(shape));
  }
  return emit_new(*s, op, node, master::mirror(shape, dtype, device, op), fb::Op::Create, [&](auto& b, uint64_t id) {
    const auto dims = b.CreateVector(shape);
    const fb::Scalar v = protocol::to_fb(args.value), st = protocol::to_fb(args.start),
                     en = protocol::to_fb(args.end), sp = protocol::to_fb(args.step);
    const fb::Device dev = protocol::to_fb(device);
    // The CPU is the field's absence: a CPU creation is as small as before devices.
    return fb::CreateCreate(b, id, kind, protocol::to_fb(dtype), dims, &v, &st, &en, &sp, args.steps, args.rows,
                            args.cols, device.is_cpu() ? nullptr : &dev)
        .Union();
  });
}

}  // namespace

DistributedTensor::DistributedTensor(const Shape& shape, DType dtype)
    : DistributedTensor(create("DistributedTensor", shape, dtype, std::nullopt, fb::CreateKind::Empty)) {}

DistributedTensor::DistributedTensor(const Shape& shape, DType dtype, Device device)
    : DistributedTensor(create("DistributedTensor", shape, dtype, device, fb::CreateKind::Empty)) {}

int DistributedTensor::node() const { return operand(*this, "node").node; }
Device DistributedTensor::device() const { return operand(*this, "device").device; }
DType DistributedTensor::dtype() const { return operand(*this, "dtype").meta().dtype(); }
const Shape& DistributedTensor::shape() const { return operand(*this, "shape").meta().shape(); }
const Shape& DistributedTensor::strides() const { return operand(*this, "strides").meta().strides(); }
int64_t DistributedTensor::dim() const { return operand(*this, "dim").meta().dim(); }
int64_t DistributedTensor::size(int64_t d) const { return operand(*this, "size").meta().size(d); }
int64_t DistributedTensor::numel() const { return operand(*this, "numel").meta().numel(); }
size_t DistributedTensor::element_size() const { return operand(*this, "element_size").meta().element_size(); }
size_t DistributedTensor::nbytes() const { return operand(*this, "nbytes").meta().nbytes(); }
bool DistributedTensor::is_contiguous() const { return operand(*this, "is_contiguous").meta().is_contiguous(); }
uint64_t DistributedTensor::id() const { return operand(*this, "id").id; }

Tensor DistributedTensor::get() const {
  const master::Handle& h = operand(*this, "get");
  return session_of(h, "get")->fetch(h);
}

DistributedTensor DistributedTensor::from(const Tensor& local, std::optional<int> node, std::optional<Device> on) {
  if (!local.defined()) THD_THROW(ValueError, "dist_send", "the local tensor is undefined");
  master::check_not_capturing("dist_send", "it sends tensor bytes from the master, which a graph cannot hold (upload "
                                           "before the capture, and copy_ into the graph's input between replays)");
  int target;
  Device device;
  auto s = placement("dist_send", on, target, device, node);
  // The bytes leave from host memory (a CUDA tensor of the master's is copied there
  // first) and land in the worker's, which copies them to `device`.
  const Tensor bytes = local.device().is_cpu() ? local.contiguous() : local.to(Device::cpu()).contiguous();
  master::NodeLink& link = s->link(target, "dist_send");
  auto h = s->new_handle(target, device, master::mirror(local.shape(), local.dtype(), device));
  const uint64_t id = h->id;
  const fb::Device dev = protocol::to_fb(device);
  link.append_upload(
      [&](auto& b) {
        return fb::CreateUpload(b, id, protocol::to_fb(local.dtype()), b.CreateVector(local.shape()),
                                device.is_cpu() ? nullptr : &dev)
            .Union();
      },
      bytes);
  return DistributedTensor(std::move(h));
}

DistributedTensor Tensor::dist_send(std::optional<int> node) const { return DistributedTensor::from(*this, node); }

DistributedTensor DistributedTensor::to_node(int target) const {
  const master::Handle& h = operand(*this, "to_node");
  auto s = session_of(h, "to_node");
  master::NodeLink& dst = s->link(target, "to_node");
  master::NodeLink& src = s->link(h.node, "to_node");
  if (target == h.node) return *this;
  const int64_t tag = s->next_transfer_tag();
  // On the same device of node k (cuda:1 stays cuda:1): its worker refuses a GPU
  // it does not have.
  const Tensor meta = master::mirror(h.meta().shape(), h.meta().dtype(), h.device);
  auto out = s->new_handle(target, h.device, meta);
  const fb::Device dev = protocol::to_fb(h.device);
  // Both halves under one lock: every worker sees cross-node commands in one global
  // order, so a blocking receive never waits on a send queued behind another one.
  std::lock_guard lock(s->cross_node_mutex());
  src.append(fb::Op::SendTo, [&](auto& b) { return fb::CreateSendTo(b, h.id, target, tag).Union(); });
  dst.append(fb::Op::RecvFrom, [&](auto& b) {
    return fb::CreateRecvFrom(b, out->id, h.node, tag, protocol::to_fb(meta.dtype()), b.CreateVector(meta.shape()),
                              h.device.is_cpu() ? nullptr : &dev)
        .Union();
  });
  // The receiver blocks until the sender runs: send both batches now.
  src.flush();
  dst.flush();
  return DistributedTensor(std::move(out));
}

DistributedTensor DistributedTensor::cuda(int index) const { return to(Device::cuda(index)); }
DistributedTensor DistributedTensor::cpu() const { return to(Device::cpu()); }
DistributedTensor DistributedTensor::to(Device device, bool copy) const {
  const master::Handle& h = operand(*this, "to");
  if (device == h.device && !copy) return *this;
  master::check_device_valid(device, "to");
  auto s = session_of(h, "to");
  return master::at_node(h.node, [&] {
    return emit_new(*s, "to", h.node, master::mirror(h.meta().shape(), h.meta().dtype(), device), fb::Op::ToDevice,
                    [&](auto& b, uint64_t id) {
                      const fb::Device dev = protocol::to_fb(device);
                      return fb::CreateToDevice(b, id, h.id, &dev).Union();
                    });
  });
}

DistributedTensor DistributedTensor::empty(const Shape& shape, DType dtype, std::optional<Device> device) {
  return create("empty", shape, dtype, device, fb::CreateKind::Empty);
}
DistributedTensor DistributedTensor::zeros(const Shape& shape, DType dtype, std::optional<Device> device) {
  return create("zeros", shape, dtype, device, fb::CreateKind::Zeros);
}
DistributedTensor DistributedTensor::ones(const Shape& shape, DType dtype, std::optional<Device> device) {
  return create("ones", shape, dtype, device, fb::CreateKind::Ones);
}
DistributedTensor DistributedTensor::full(const Shape& shape, Scalar value, DType dtype,
                                          std::optional<Device> device) {
  (void)Tensor::full({}, value, dtype);  // the value must fit the dtype: checked here, as locally
  return create("full", shape, dtype, device, fb::CreateKind::Full, {.value = value});
}
DistributedTensor DistributedTensor::arange(Scalar end, std::optional<DType> dtype, std::optional<Device> device) {
  return arange(0, end, 1, dtype, device);
}
DistributedTensor DistributedTensor::arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype,
                                            std::optional<Device> device) {
  const bool any_float = start.is_floating_point() || end.is_floating_point() || step.is_floating_point();
  const DType dt = dtype.value_or(any_float ? kFloat32 : kInt64);
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  if (!std::isfinite(s) || !std::isfinite(e)) THD_THROW(ValueError, "arange", "start ({}) and end ({}) must be finite", s, e);
  if (st == 0) THD_THROW(ValueError, "arange", "step must be nonzero");
  if (!((st > 0 && e >= s) || (st < 0 && e <= s))) {
    THD_THROW(ValueError, "arange", "upper bound and larger bound inconsistent with step sign (start {}, end {}, step {})",
              s, e, st);
  }
  int64_t n;
  if (any_float || is_floating_point(dt)) {
    n = static_cast<int64_t>(std::ceil((e - s) / st));
  } else {
    const int64_t is = start.to_int64(), ie = end.to_int64(), ist = step.to_int64();
    n = ist > 0 ? (ie - is + ist - 1) / ist : (is - ie - ist - 1) / -ist;
  }
  (void)Tensor::arange(0, 1, 1, dt);  // dtype support, as locally
  return create("arange", {n}, dt, device, fb::CreateKind::Arange, {.start = start, .end = end, .step = step});
}
DistributedTensor DistributedTensor::linspace(Scalar start, Scalar end, int64_t steps, DType dtype,
                                              std::optional<Device> device) {
  if (steps < 0) THD_THROW(ValueError, "linspace", "number of steps must be non-negative, got {}", steps);
  (void)Tensor::linspace(start, end, 1, dtype);
  return create("linspace", {steps}, dtype, device, fb::CreateKind::Linspace,
                {.start = start, .end = end, .steps = steps});
}
DistributedTensor DistributedTensor::eye(int64_t n, int64_t m, DType dtype, std::optional<Device> device) {
  const Tensor probe = Tensor::eye(std::min<int64_t>(n, 1), m < 0 ? -1 : std::min<int64_t>(m, 1), dtype);
  (void)probe;
  if (n < 0) THD_THROW(ValueError, "eye", "n must be non-negative, got {}", n);
  const int64_t cols = m < 0 ? n : m;
  return create("eye", {n, cols}, dtype, device, fb::CreateKind::Eye, {.rows = n, .cols = cols});
}
DistributedTensor DistributedTensor::rand(const Shape& shape, DType dtype, std::optional<Device> device) {
  (void)Tensor::rand({0}, dtype);
  return create("rand", shape, dtype, device, fb::CreateKind::Rand);
}
DistributedTensor DistributedTensor::randn(const Shape& shape, DType dtype, std::optional<Device> device) {
  (void)Tensor::randn({0}, dtype);
  return create("randn", shape, dtype, device, fb::CreateKind::Randn);
}
DistributedTensor DistributedTensor::randint(int64_t low, int64_t high, const Shape& shape, DType dtype,
                                             std::optional<Device> device) {
  (void)Tensor::randint(low, high, {0}, dtype);
  return create("randint", shape, dtype, device, fb::CreateKind::Randint, {.start = low, .end = high});
}

std::string DistributedTensor::str() const {
  if (!defined()) return "DistributedTensor(undefined)";
  const master::Handle& h = *handle_;
  return fmt::format("DistributedTensor(node={}, device={}, dtype={}, shape={}, id={})", h.node, h.device.str(),
                     dtype_name(h.meta().dtype()), shape_str(h.meta().shape()), h.id);
}

std::ostream& operator<<(std::ostream& os, const DistributedTensor& t) { return os << t.str(); }

}  // namespace thd
