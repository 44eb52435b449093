// DistributedTensor ops: each checks its operands and infers the result on the
// master (bad calls throw here), then queues one command for the node.
#include <array>
#include <concepts>
#include <tuple>

#include "master/emit.h"
#include "master/infer.h"
#include "protocol/op_table.h"
#include "tensor/check.h"

namespace thd {

using master::emit_new;
using master::Handle;
using master::operand;
using master::session_of;
namespace fb = protocol::fb;

namespace {

fb::Scalar fbs(const Scalar& s) { return protocol::to_fb(s); }

// The operands of one call of an op, checked in the order given: each defined
// and of a live session (operand()), all on one node (check_same_node) and one
// device of it (check_same_device); and the first one's session, to which the op's
// command goes, on that node. Results go to the first operand's device.
template <size_t N>
struct Operands {
  const char* name;
  std::array<const Handle*, N> handles;
  std::shared_ptr<master::Session> session;

  const Handle& operator[](size_t i) const { return *handles[i]; }
  int node() const { return handles[0]->node; }
  Device device() const { return handles[0]->device; }

  // Runs the op's checks, inference and command: an error they raise names the node.
  template <typename F>
  decltype(auto) at_node(F&& f) const {
    return master::at_node(node(), std::forward<F>(f));
  }
  // The op's result, a new tensor `meta` (on the operands' device) made by the
  // command `build` returns.
  template <typename Build>
  DistributedTensor emit_new(Tensor meta, fb::Op type, Build&& build) const {
    return master::emit_new(*session, name, node(), master::on_device(std::move(meta), device()), type,
                            std::forward<Build>(build));
  }
  // As emit_new, for an elementwise command (out set to the result's id).
  DistributedTensor emit_elementwise(Tensor meta, const protocol::ElementwiseCommand& command) const {
    return master::emit_elementwise(*session, name, node(), device(), master::on_device(std::move(meta), device()),
                                     command);
  }
  // As emit_elementwise, for a result whose mirror is made on first use.
  DistributedTensor emit_fresh(const master::FreshMeta& fresh, const protocol::ElementwiseCommand& command) const {
    return master::emit_elementwise(*session, name, node(), device(), fresh, command);
  }
  // The in-place form of an elementwise command (out == 0), which writes the first operand.
  void emit_elementwise_inplace(const protocol::ElementwiseCommand& command) const {
    session->link(node(), name).append_elementwise(command);
  }
  // The command of an in-place op, which writes the first operand.
  template <typename Build>
  void emit_inplace(fb::Op type, Build&& build) const {
    master::emit_inplace(*session, name, *handles[0], type, std::forward<Build>(build));
  }
};

enum class Devices { Same, Any };

template <std::same_as<DistributedTensor>... Ts>
Operands<sizeof...(Ts)> operands_on(Devices devices, const char* name, const Ts&... xs) {
  Operands<sizeof...(Ts)> ops{name, {&operand(xs, name)...}, nullptr};  // in order: the first bad one is named
  if constexpr (sizeof...(Ts) > 1) {
    std::apply([&](const auto*... h) { master::check_same_node(name, {h...}); }, ops.handles);
    if (devices == Devices::Same) {
      ops.at_node([&] { std::apply([&](const auto*... h) { master::check_same_device(name, {h...}); }, ops.handles); });
    }
  }
  ops.session = session_of(*ops.handles[0], name);
  return ops;
}

template <std::same_as<DistributedTensor>... Ts>
Operands<sizeof...(Ts)> operands(const char* name, const Ts&... xs) {
  return operands_on(Devices::Same, name, xs...);
}

// A probe index for index ops' inference: zeros (a valid index) of `i`'s rank and dtype.
Tensor index_probe(const Handle& i) { return Tensor::zeros(Shape(i.meta().shape().size(), 1), i.meta().dtype()); }

// The command of an op that comes as a new tensor of `shape` and `dtype` (x.op())
// and in place (x.op_(), writing `self`, the first operand): `build(b, id)` makes
// it for the new tensor's id, or for 0 in place.
template <size_t N, typename Build>
DistributedTensor emit_new_or_inplace(const Operands<N>& ops, const DistributedTensor& self, bool inplace,
                                      const Shape& shape, DType dtype, fb::Op type, Build&& build) {
  if (inplace) {
    ops.emit_inplace(type, [&](auto& b) { return build(b, 0); });
    return self;
  }
  return ops.emit_new(master::mirror(shape, dtype), type, build);
}

using Elementwise = protocol::ElementwiseCommand;

uint8_t code(fb::BinaryOp op) { return static_cast<uint8_t>(op); }
uint8_t code(fb::UnaryOp op) { return static_cast<uint8_t>(op); }

DistributedTensor binary(fb::BinaryOp op, const DistributedTensor& x, const DistributedTensor& y) {
  const auto ops = operands(protocol::op_name(op), x, y);
  const Handle& a = ops[0];
  const Handle& b = ops[1];
  return ops.at_node([&]() -> DistributedTensor {
    const Elementwise command{.type = fb::Op::Binary, .op = code(op), .a = a.id, .b = b.id};
    if (const auto fresh = master::infer_fresh(op, a, b)) return ops.emit_fresh(*fresh, command);
    return ops.emit_elementwise(master::infer(op, a.meta(), b.meta()), command);
  });
}

DistributedTensor& binary_(fb::BinaryOp op, DistributedTensor& x, const DistributedTensor& y) {
  const auto ops = operands(protocol::op_name(op), x, y);
  const Handle& a = ops[0];
  const Handle& b = ops[1];
  ops.at_node([&] {
    master::check_inplace(op, a.meta(), b.meta());
    ops.emit_elementwise_inplace(Elementwise{.type = fb::Op::Binary, .op = code(op), .a = a.id, .b = b.id});
  });
  return x;
}

DistributedTensor binary(fb::BinaryOp op, const DistributedTensor& x, const Scalar& v, bool reverse = false) {
  const auto ops = operands(protocol::op_name(op), x);
  const Handle& a = ops[0];
  return ops.at_node([&]() -> DistributedTensor {
    const Elementwise command{
        .type = fb::Op::BinaryScalar, .op = code(op), .a = a.id, .scalar = fbs(v), .reverse = reverse};
    if (const auto fresh = master::infer_fresh(op, a, v, reverse)) return ops.emit_fresh(*fresh, command);
    return ops.emit_elementwise(master::infer(op, a.meta(), v, reverse), command);
  });
}

DistributedTensor& binary_(fb::BinaryOp op, DistributedTensor& x, const Scalar& v) {
  const auto ops = operands(protocol::op_name(op), x);
  const Handle& a = ops[0];
  ops.at_node([&] {
    master::check_inplace(op, a.meta(), v);
    ops.emit_elementwise_inplace(
        Elementwise{.type = fb::Op::BinaryScalar, .op = code(op), .a = a.id, .scalar = fbs(v)});
  });
  return x;
}

DistributedTensor unary(fb::UnaryOp op, const DistributedTensor& x) {
  const auto ops = operands(protocol::op_name(op), x);
  const Handle& a = ops[0];
  return ops.at_node([&]() -> DistributedTensor {
    const Elementwise command{.type = fb::Op::Unary, .op = code(op), .a = a.id};
    if (const auto fresh = master::infer_fresh(op, a)) return ops.emit_fresh(*fresh, command);
    return ops.emit_elementwise(master::infer(op, a.meta()), command);
  });
}

DistributedTensor& unary_(fb::UnaryOp op, DistributedTensor& x) {
  const auto ops = operands(protocol::op_name(op), x);
  const Handle& a = ops[0];
  ops.at_node([&] {
    master::check_inplace(op, a.meta());
    ops.emit_elementwise_inplace(Elementwise{.type = fb::Op::Unary, .op = code(op), .a = a.id});
  });
  return x;
}

struct ViewArgs {
  Shape shape = {};
  Dims dims = {};
  int64_t dim0 = 0, dim1 = 0, start = 0, end = 0, step = 1;
};

// A view computed on the mirror: exactly the metadata the worker's view will
// have. `local` must only run view ops (a mirror has metadata, not bytes).
DistributedTensor make_view(const char* name, const DistributedTensor& x, fb::ViewKind kind, const ViewArgs& v,
                            const std::function<Tensor(const Tensor&)>& local) {
  const auto ops = operands(name, x);
  const Handle& a = ops[0];
  return ops.at_node([&]() -> DistributedTensor {
    Tensor meta = local(a.meta());
    return ops.emit_new(std::move(meta), fb::Op::ViewOp, [&](auto& b, uint64_t id) {
      const auto shape = b.CreateVector(v.shape);
      const auto dims = b.CreateVector(v.dims);
      return fb::CreateViewOp(b, id, kind, a.id, shape, dims, v.dim0, v.dim1, v.start, v.end, v.step).Union();
    });
  });
}

// reshape/flatten: a view when the strides allow, else a fresh contiguous
// tensor (the worker copies then), whose shape a contiguous mirror gives.
Tensor view_or_copy(const Tensor& meta, const std::function<Tensor(const Tensor&)>& reshape) {
  try {
    return reshape(meta);
  } catch (const Error&) {
    Tensor contiguous = master::mirror(meta.shape(), meta.dtype());
    return master::mirror(reshape(contiguous).shape(), meta.dtype());
  }
}

DistributedTensor reduce(const char* name, const DistributedTensor& x, fb::ReduceKind kind, bool all, const Dims& dims,
                         bool keepdim, double p, int64_t correction,
                         const std::function<Tensor(const Tensor&)>& local) {
  const auto ops = operands(name, x);
  const Handle& a = ops[0];
  return ops.at_node([&]() -> DistributedTensor {
    const Shape shape = all ? Shape{} : master::reduced_shape(name, a.meta().shape(), dims, keepdim);
    const DType dtype = local(master::probe_of(a.meta())).dtype();
    return ops.emit_new(master::mirror(shape, dtype), fb::Op::Reduce, [&](auto& b, uint64_t id) {
      return fb::CreateReduce(b, id, kind, a.id, all, b.CreateVector(dims), keepdim, p, correction).Union();
    });
  });
}

DistributedTensor clamp_op(DistributedTensor& self, bool inplace, const std::optional<Scalar>& lo,
                           const std::optional<Scalar>& hi) {
  const auto ops = operands(inplace ? "clamp_" : "clamp", self);
  const Handle& a = ops[0];
  return ops.at_node([&]() -> DistributedTensor {
    Tensor p = master::probe_of(a.meta());
    const DType dtype = inplace ? p.clamp_(lo, hi).dtype() : p.clamp(lo, hi).dtype();
    const fb::Scalar l = fbs(lo.value_or(0)), h = fbs(hi.value_or(0));
    return emit_new_or_inplace(ops, self, inplace, a.meta().shape(), dtype, fb::Op::Clamp,
                               [&](auto& b, uint64_t id) {
                                 return fb::CreateClamp(b, id, a.id, lo.has_value(), &l, hi.has_value(), &h).Union();
                               });
  });
}

DistributedTensor masked_fill_op(DistributedTensor& self, bool inplace, const DistributedTensor& mask,
                                 const Scalar& value) {
  const auto ops = operands(inplace ? "masked_fill_" : "masked_fill", self, mask);
  const Handle& a = ops[0];
  const Handle& m = ops[1];
  return ops.at_node([&]() -> DistributedTensor {
    master::check_broadcasts_to(ops.name, m.meta().shape(), a.meta().shape());
    Tensor p = master::probe_of(a.meta());
    if (inplace) {
      p.masked_fill_(master::probe_of(m.meta()), value);
    } else {
      (void)p.masked_fill(master::probe_of(m.meta()), value);
    }
    const fb::Scalar v = fbs(value);
    return emit_new_or_inplace(
        ops, self, inplace, a.meta().shape(), a.meta().dtype(), fb::Op::MaskedFill,
        [&](auto& b, uint64_t id) { return fb::CreateMaskedFill(b, id, a.id, m.id, &v).Union(); });
  });
}

DistributedTensor softmax_op(const DistributedTensor& x, int64_t d, bool log) {
  const auto ops = operands(log ? "log_softmax" : "softmax", x);
  const Handle& a = ops[0];
  return ops.at_node([&]() -> DistributedTensor {
    const Tensor p = master::probe_of(a.meta());
    const DType dtype = (log ? p.log_softmax(d) : p.softmax(d)).dtype();
    return ops.emit_new(master::mirror(a.meta().shape(), dtype), fb::Op::Softmax,
                        [&](auto& b, uint64_t id) { return fb::CreateSoftmax(b, id, a.id, d, log).Union(); });
  });
}

DistributedTensor matmul_op(fb::MatmulKind kind, const char* name, const DistributedTensor& x,
                            const DistributedTensor& y,
                            const std::function<Tensor(const Tensor&, const Tensor&)>& local) {
  const auto ops = operands(name, x, y);
  const Handle& a = ops[0];
  const Handle& b = ops[1];
  return ops.at_node([&]() -> DistributedTensor {
    const DType dtype = local(master::probe_of(a.meta()), master::probe_of(b.meta())).dtype();
    const Shape shape = kind == fb::MatmulKind::Outer ? Shape{a.meta().numel(), b.meta().numel()}
                                                      : master::matmul_shape(name, a.meta().shape(), b.meta().shape());
    if (kind == fb::MatmulKind::Bmm && a.meta().size(0) != b.meta().size(0)) {
      THD_THROW(ShapeError, name, "batch sizes differ: {} and {}", shape_str(a.meta().shape()),
                shape_str(b.meta().shape()));
    }
    return ops.emit_new(master::mirror(shape, dtype), fb::Op::Matmul,
                        [&](auto& bld, uint64_t id) { return fb::CreateMatmul(bld, id, kind, a.id, b.id).Union(); });
  });
}

}  // namespace

// ---- views
// ---------------------------------------------------------------------------
DistributedTensor DistributedTensor::view(const Shape& shape) const {
  return make_view("view", *this, fb::ViewKind::View, {.shape = shape}, [&](const Tensor& m) { return m.view(shape); });
}
DistributedTensor DistributedTensor::reshape(const Shape& shape) const {
  return make_view("reshape", *this, fb::ViewKind::Reshape, {.shape = shape},
                   [&](const Tensor& m) { return view_or_copy(m, [&](const Tensor& t) { return t.view(shape); }); });
}
DistributedTensor DistributedTensor::flatten(int64_t start_dim, int64_t end_dim) const {
  return make_view("flatten", *this, fb::ViewKind::Flatten, {.dim0 = start_dim, .dim1 = end_dim}, [&](const Tensor& m) {
    return view_or_copy(m, [&](const Tensor& t) {
      // flatten's shape, then a view of it (which throws when
      // a copy is needed).
      const Shape flat = master::mirror(t.shape(), t.dtype()).flatten(start_dim, end_dim).shape();
      return t.view(flat);
    });
  });
}
DistributedTensor DistributedTensor::transpose(int64_t d0, int64_t d1) const {
  return make_view("transpose", *this, fb::ViewKind::Transpose, {.dim0 = d0, .dim1 = d1},
                   [&](const Tensor& m) { return m.transpose(d0, d1); });
}
DistributedTensor DistributedTensor::t() const {
  const int64_t d = dim();
  return make_view("t", *this, fb::ViewKind::Transpose, {.dim0 = 0, .dim1 = d < 2 ? 0 : 1},
                   [](const Tensor& m) { return m.t(); });
}
DistributedTensor DistributedTensor::permute(const Dims& dims) const {
  return make_view("permute", *this, fb::ViewKind::Permute, {.dims = dims},
                   [&](const Tensor& m) { return m.permute(dims); });
}
DistributedTensor DistributedTensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  return make_view("slice", *this, fb::ViewKind::Slice, {.dim0 = d, .start = start, .end = end, .step = step},
                   [&](const Tensor& m) { return m.slice(d, start, end, step); });
}
DistributedTensor DistributedTensor::narrow(int64_t d, int64_t start, int64_t length) const {
  return make_view("narrow", *this, fb::ViewKind::Narrow, {.dim0 = d, .start = start, .end = length},
                   [&](const Tensor& m) { return m.narrow(d, start, length); });
}
DistributedTensor DistributedTensor::select(int64_t d, int64_t index) const {
  return make_view("select", *this, fb::ViewKind::Select, {.dim0 = d, .start = index},
                   [&](const Tensor& m) { return m.select(d, index); });
}
DistributedTensor DistributedTensor::expand(const Shape& shape) const {
  return make_view("expand", *this, fb::ViewKind::Expand, {.shape = shape},
                   [&](const Tensor& m) { return m.expand(shape); });
}
DistributedTensor DistributedTensor::squeeze() const {
  return make_view("squeeze", *this, fb::ViewKind::Squeeze, {}, [&](const Tensor& m) { return m.squeeze(); });
}
DistributedTensor DistributedTensor::squeeze(int64_t d) const {
  return make_view("squeeze", *this, fb::ViewKind::SqueezeDim, {.dim0 = d},
                   [&](const Tensor& m) { return m.squeeze(d); });
}
DistributedTensor DistributedTensor::unsqueeze(int64_t d) const {
  return make_view("unsqueeze", *this, fb::ViewKind::Unsqueeze, {.dim0 = d},
                   [&](const Tensor& m) { return m.unsqueeze(d); });
}
DistributedTensor DistributedTensor::contiguous() const {
  if (operand(*this, "contiguous").meta().is_contiguous()) return *this;
  return unary(fb::UnaryOp::Contiguous, *this);
}
DistributedTensor DistributedTensor::clone() const { return unary(fb::UnaryOp::Clone, *this); }

// ---- elementwise
// ---------------------------------------------------------------------
DistributedTensor DistributedTensor::add(const DistributedTensor& o) const {
  return binary(fb::BinaryOp::Add, *this, o);
}
DistributedTensor DistributedTensor::add(Scalar o) const { return binary(fb::BinaryOp::Add, *this, o); }
DistributedTensor DistributedTensor::sub(const DistributedTensor& o) const {
  return binary(fb::BinaryOp::Sub, *this, o);
}
DistributedTensor DistributedTensor::sub(Scalar o) const { return binary(fb::BinaryOp::Sub, *this, o); }
DistributedTensor DistributedTensor::mul(const DistributedTensor& o) const {
  return binary(fb::BinaryOp::Mul, *this, o);
}
DistributedTensor DistributedTensor::mul(Scalar o) const { return binary(fb::BinaryOp::Mul, *this, o); }
DistributedTensor DistributedTensor::div(const DistributedTensor& o) const {
  return binary(fb::BinaryOp::Div, *this, o);
}
DistributedTensor DistributedTensor::div(Scalar o) const { return binary(fb::BinaryOp::Div, *this, o); }
DistributedTensor DistributedTensor::pow(const DistributedTensor& o) const {
  return binary(fb::BinaryOp::Pow, *this, o);
}
DistributedTensor DistributedTensor::pow(Scalar o) const { return binary(fb::BinaryOp::Pow, *this, o); }
DistributedTensor DistributedTensor::eq(const DistributedTensor& o) const { return binary(fb::BinaryOp::Eq, *this, o); }
DistributedTensor DistributedTensor::eq(Scalar o) const { return binary(fb::BinaryOp::Eq, *this, o); }
DistributedTensor DistributedTensor::ne(const DistributedTensor& o) const { return binary(fb::BinaryOp::Ne, *this, o); }
DistributedTensor DistributedTensor::ne(Scalar o) const { return binary(fb::BinaryOp::Ne, *this, o); }
DistributedTensor DistributedTensor::lt(const DistributedTensor& o) const { return binary(fb::BinaryOp::Lt, *this, o); }
DistributedTensor DistributedTensor::lt(Scalar o) const { return binary(fb::BinaryOp::Lt, *this, o); }
DistributedTensor DistributedTensor::le(const DistributedTensor& o) const { return binary(fb::BinaryOp::Le, *this, o); }
DistributedTensor DistributedTensor::le(Scalar o) const { return binary(fb::BinaryOp::Le, *this, o); }
DistributedTensor DistributedTensor::gt(const DistributedTensor& o) const { return binary(fb::BinaryOp::Gt, *this, o); }
DistributedTensor DistributedTensor::gt(Scalar o) const { return binary(fb::BinaryOp::Gt, *this, o); }
DistributedTensor DistributedTensor::ge(const DistributedTensor& o) const { return binary(fb::BinaryOp::Ge, *this, o); }
DistributedTensor DistributedTensor::ge(Scalar o) const { return binary(fb::BinaryOp::Ge, *this, o); }
DistributedTensor DistributedTensor::maximum(const DistributedTensor& o) const {
  return binary(fb::BinaryOp::Maximum, *this, o);
}
DistributedTensor DistributedTensor::minimum(const DistributedTensor& o) const {
  return binary(fb::BinaryOp::Minimum, *this, o);
}
DistributedTensor& DistributedTensor::add_(const DistributedTensor& o) { return binary_(fb::BinaryOp::Add, *this, o); }
DistributedTensor& DistributedTensor::add_(Scalar o) { return binary_(fb::BinaryOp::Add, *this, o); }
DistributedTensor& DistributedTensor::sub_(const DistributedTensor& o) { return binary_(fb::BinaryOp::Sub, *this, o); }
DistributedTensor& DistributedTensor::sub_(Scalar o) { return binary_(fb::BinaryOp::Sub, *this, o); }
DistributedTensor& DistributedTensor::mul_(const DistributedTensor& o) { return binary_(fb::BinaryOp::Mul, *this, o); }
DistributedTensor& DistributedTensor::mul_(Scalar o) { return binary_(fb::BinaryOp::Mul, *this, o); }
DistributedTensor& DistributedTensor::div_(const DistributedTensor& o) { return binary_(fb::BinaryOp::Div, *this, o); }
DistributedTensor& DistributedTensor::div_(Scalar o) { return binary_(fb::BinaryOp::Div, *this, o); }
DistributedTensor& DistributedTensor::pow_(const DistributedTensor& o) { return binary_(fb::BinaryOp::Pow, *this, o); }
DistributedTensor& DistributedTensor::pow_(Scalar o) { return binary_(fb::BinaryOp::Pow, *this, o); }
DistributedTensor DistributedTensor::neg() const { return unary(fb::UnaryOp::Neg, *this); }
DistributedTensor& DistributedTensor::neg_() { return unary_(fb::UnaryOp::Neg, *this); }
DistributedTensor DistributedTensor::abs() const { return unary(fb::UnaryOp::Abs, *this); }
DistributedTensor& DistributedTensor::abs_() { return unary_(fb::UnaryOp::Abs, *this); }
DistributedTensor DistributedTensor::exp() const { return unary(fb::UnaryOp::Exp, *this); }
DistributedTensor& DistributedTensor::exp_() { return unary_(fb::UnaryOp::Exp, *this); }
DistributedTensor DistributedTensor::log() const { return unary(fb::UnaryOp::Log, *this); }
DistributedTensor& DistributedTensor::log_() { return unary_(fb::UnaryOp::Log, *this); }
DistributedTensor DistributedTensor::sqrt() const { return unary(fb::UnaryOp::Sqrt, *this); }
DistributedTensor& DistributedTensor::sqrt_() { return unary_(fb::UnaryOp::Sqrt, *this); }
DistributedTensor DistributedTensor::rsqrt() const { return unary(fb::UnaryOp::Rsqrt, *this); }
DistributedTensor& DistributedTensor::rsqrt_() { return unary_(fb::UnaryOp::Rsqrt, *this); }
DistributedTensor DistributedTensor::sin() const { return unary(fb::UnaryOp::Sin, *this); }
DistributedTensor& DistributedTensor::sin_() { return unary_(fb::UnaryOp::Sin, *this); }
DistributedTensor DistributedTensor::cos() const { return unary(fb::UnaryOp::Cos, *this); }
DistributedTensor& DistributedTensor::cos_() { return unary_(fb::UnaryOp::Cos, *this); }
DistributedTensor DistributedTensor::tanh() const { return unary(fb::UnaryOp::Tanh, *this); }
DistributedTensor& DistributedTensor::tanh_() { return unary_(fb::UnaryOp::Tanh, *this); }
DistributedTensor DistributedTensor::sigmoid() const { return unary(fb::UnaryOp::Sigmoid, *this); }
DistributedTensor& DistributedTensor::sigmoid_() { return unary_(fb::UnaryOp::Sigmoid, *this); }
DistributedTensor DistributedTensor::relu() const { return unary(fb::UnaryOp::Relu, *this); }
DistributedTensor& DistributedTensor::relu_() { return unary_(fb::UnaryOp::Relu, *this); }
DistributedTensor DistributedTensor::gelu() const { return unary(fb::UnaryOp::Gelu, *this); }
DistributedTensor& DistributedTensor::gelu_() { return unary_(fb::UnaryOp::Gelu, *this); }

DistributedTensor DistributedTensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const {
  DistributedTensor self = *this;
  return clamp_op(self, false, lo, hi);
}
DistributedTensor& DistributedTensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  clamp_op(*this, true, lo, hi);
  return *this;
}

DistributedTensor DistributedTensor::to(DType dtype, bool copy) const {
  if (dtype == operand(*this, "to").meta().dtype() && !copy) return *this;
  const auto ops = operands("to", *this);
  const Handle& a = ops[0];
  return ops.at_node([&]() -> DistributedTensor {
    (void)master::probe_of(a.meta()).to(dtype);
    return ops.emit_new(master::mirror(a.meta().shape(), dtype), fb::Op::Cast, [&](auto& b, uint64_t id) {
      return fb::CreateCast(b, id, a.id, protocol::to_fb(dtype)).Union();
    });
  });
}

DistributedTensor& DistributedTensor::fill_(Scalar value) {
  const auto ops = operands("fill_", *this);
  const Handle& a = ops[0];
  ops.at_node([&] { master::check_writable("fill_", a.meta()); });
  Tensor p = master::probe_of(a.meta());
  p.fill_(value);  // the value must fit the dtype
  const fb::Scalar v = fbs(value);
  ops.emit_inplace(fb::Op::Fill, [&](auto& b) { return fb::CreateFill(b, a.id, &v).Union(); });
  return *this;
}

DistributedTensor& DistributedTensor::copy_(const DistributedTensor& src) {
  // Across devices too, as torch's copy_ (the worker moves src to self's device).
  const auto ops = operands_on(Devices::Any, "copy_", *this, src);
  const Handle& a = ops[0];
  const Handle& b = ops[1];
  ops.at_node([&] {
    master::check_broadcasts_to("copy_", b.meta().shape(), a.meta().shape());
    ops.emit_inplace(fb::Op::CopyFrom, [&](auto& bld) { return fb::CreateCopyFrom(bld, a.id, b.id).Union(); });
  });
  return *this;
}

// ---- reductions
// ---------------------------------------------------------------------------
DistributedTensor DistributedTensor::sum() const {
  return reduce("sum", *this, fb::ReduceKind::Sum, true, {}, false, 0, 0, [](const Tensor& p) { return p.sum(); });
}
DistributedTensor DistributedTensor::sum(const Dims& d, bool k) const {
  return reduce("sum", *this, fb::ReduceKind::Sum, false, d, k, 0, 0, [&](const Tensor& p) { return p.sum(d, k); });
}
DistributedTensor DistributedTensor::mean() const {
  return reduce("mean", *this, fb::ReduceKind::Mean, true, {}, false, 0, 0, [](const Tensor& p) { return p.mean(); });
}
DistributedTensor DistributedTensor::mean(const Dims& d, bool k) const {
  return reduce("mean", *this, fb::ReduceKind::Mean, false, d, k, 0, 0, [&](const Tensor& p) { return p.mean(d, k); });
}
DistributedTensor DistributedTensor::prod() const {
  return reduce("prod", *this, fb::ReduceKind::Prod, true, {}, false, 0, 0, [](const Tensor& p) { return p.prod(); });
}
DistributedTensor DistributedTensor::prod(const Dims& d, bool k) const {
  return reduce("prod", *this, fb::ReduceKind::Prod, false, d, k, 0, 0, [&](const Tensor& p) { return p.prod(d, k); });
}
DistributedTensor DistributedTensor::max() const {
  return reduce("max", *this, fb::ReduceKind::Max, true, {}, false, 0, 0, [](const Tensor& p) { return p.max(); });
}
DistributedTensor DistributedTensor::max(const Dims& d, bool k) const {
  return reduce("max", *this, fb::ReduceKind::Max, false, d, k, 0, 0, [&](const Tensor& p) { return p.max(d, k); });
}
DistributedTensor DistributedTensor::min() const {
  return reduce("min", *this, fb::ReduceKind::Min, true, {}, false, 0, 0, [](const Tensor& p) { return p.min(); });
}
DistributedTensor DistributedTensor::min(const Dims& d, bool k) const {
  return reduce("min", *this, fb::ReduceKind::Min, false, d, k, 0, 0, [&](const Tensor& p) { return p.min(d, k); });
}
DistributedTensor DistributedTensor::argmax() const {
  return reduce("argmax", *this, fb::ReduceKind::Argmax, true, {}, false, 0, 0,
                [](const Tensor& p) { return p.argmax(); });
}
DistributedTensor DistributedTensor::argmax(int64_t d, bool k) const {
  return reduce("argmax", *this, fb::ReduceKind::Argmax, false, {d}, k, 0, 0,
                [&](const Tensor& p) { return p.argmax(d, k); });
}
DistributedTensor DistributedTensor::argmin() const {
  return reduce("argmin", *this, fb::ReduceKind::Argmin, true, {}, false, 0, 0,
                [](const Tensor& p) { return p.argmin(); });
}
DistributedTensor DistributedTensor::argmin(int64_t d, bool k) const {
  return reduce("argmin", *this, fb::ReduceKind::Argmin, false, {d}, k, 0, 0,
                [&](const Tensor& p) { return p.argmin(d, k); });
}
DistributedTensor DistributedTensor::norm(double p) const {
  return reduce("norm", *this, fb::ReduceKind::Norm, true, {}, false, p, 0, [&](const Tensor& t) { return t.norm(p); });
}
DistributedTensor DistributedTensor::norm(double p, const Dims& d, bool k) const {
  return reduce("norm", *this, fb::ReduceKind::Norm, false, d, k, p, 0,
                [&](const Tensor& t) { return t.norm(p, d, k); });
}
DistributedTensor DistributedTensor::var() const {
  return reduce("var", *this, fb::ReduceKind::Var, true, {}, false, 0, 1, [](const Tensor& p) { return p.var(); });
}
DistributedTensor DistributedTensor::var(const Dims& d, int64_t c, bool k) const {
  return reduce("var", *this, fb::ReduceKind::Var, d.empty() && !k, d, k, 0, c,
                [&](const Tensor& p) { return p.var(d, c, k); });
}
DistributedTensor DistributedTensor::std() const {
  return reduce("std", *this, fb::ReduceKind::Std, true, {}, false, 0, 1, [](const Tensor& p) { return p.std(); });
}
DistributedTensor DistributedTensor::std(const Dims& d, int64_t c, bool k) const {
  return reduce("std", *this, fb::ReduceKind::Std, d.empty() && !k, d, k, 0, c,
                [&](const Tensor& p) { return p.std(d, c, k); });
}
DistributedTensor DistributedTensor::any() const {
  return reduce("any", *this, fb::ReduceKind::Any, true, {}, false, 0, 0, [](const Tensor& p) { return p.any(); });
}
DistributedTensor DistributedTensor::any(const Dims& d, bool k) const {
  return reduce("any", *this, fb::ReduceKind::Any, false, d, k, 0, 0, [&](const Tensor& p) { return p.any(d, k); });
}
DistributedTensor DistributedTensor::all() const {
  return reduce("all", *this, fb::ReduceKind::All, true, {}, false, 0, 0, [](const Tensor& p) { return p.all(); });
}
DistributedTensor DistributedTensor::all(const Dims& d, bool k) const {
  return reduce("all", *this, fb::ReduceKind::All, false, d, k, 0, 0, [&](const Tensor& p) { return p.all(d, k); });
}

DistributedTensor DistributedTensor::softmax(int64_t d) const { return softmax_op(*this, d, false); }
DistributedTensor DistributedTensor::log_softmax(int64_t d) const { return softmax_op(*this, d, true); }

// ---- linear algebra
// ---------------------------------------------------------------------
DistributedTensor DistributedTensor::matmul(const DistributedTensor& o) const {
  return matmul_op(fb::MatmulKind::Matmul, "matmul", *this, o,
                   [](const Tensor& a, const Tensor& b) { return a.matmul(b); });
}
DistributedTensor DistributedTensor::mm(const DistributedTensor& o) const {
  return matmul_op(fb::MatmulKind::Mm, "mm", *this, o, [](const Tensor& a, const Tensor& b) { return a.mm(b); });
}
DistributedTensor DistributedTensor::bmm(const DistributedTensor& o) const {
  return matmul_op(fb::MatmulKind::Bmm, "bmm", *this, o, [](const Tensor& a, const Tensor& b) { return a.bmm(b); });
}
DistributedTensor DistributedTensor::dot(const DistributedTensor& o) const {
  return matmul_op(fb::MatmulKind::Dot, "dot", *this, o, [](const Tensor& a, const Tensor& b) { return a.dot(b); });
}
DistributedTensor DistributedTensor::outer(const DistributedTensor& o) const {
  return matmul_op(fb::MatmulKind::Outer, "outer", *this, o,
                   [](const Tensor& a, const Tensor& b) { return a.outer(b); });
}
DistributedTensor DistributedTensor::addmm(const DistributedTensor& m1, const DistributedTensor& m2, Scalar beta,
                                           Scalar alpha) const {
  const auto ops = operands("addmm", *this, m1, m2);
  const Handle& self = ops[0];
  const Handle& a = ops[1];
  const Handle& b = ops[2];
  return ops.at_node([&]() -> DistributedTensor {
    const DType dtype =
        master::probe_of(self.meta()).addmm(master::probe_of(a.meta()), master::probe_of(b.meta()), beta, alpha).dtype();
    const Shape mm = master::matmul_shape("addmm", a.meta().shape(), b.meta().shape());
    master::check_broadcasts_to("addmm", self.meta().shape(), mm);
    const fb::Scalar fbeta = fbs(beta), falpha = fbs(alpha);
    return ops.emit_new(master::mirror(mm, dtype), fb::Op::Addmm, [&](auto& bld, uint64_t id) {
      return fb::CreateAddmm(bld, id, self.id, a.id, b.id, &fbeta, &falpha).Union();
    });
  });
}
DistributedTensor matmul(const DistributedTensor& a, const DistributedTensor& b) { return a.matmul(b); }

// ---- indexing, joining, sorting
// -------------------------------------------------------------
DistributedTensor DistributedTensor::index_select(int64_t d, const DistributedTensor& index) const {
  const auto ops = operands("index_select", *this, index);
  const Handle& a = ops[0];
  const Handle& i = ops[1];
  return ops.at_node([&]() -> DistributedTensor {
    const DType dtype = master::probe_of(a.meta()).index_select(d, index_probe(i)).dtype();
    Shape shape = a.meta().shape();
    if (!shape.empty()) shape[master::wrap_dim("index_select", d, a.meta().dim())] = i.meta().numel();
    return ops.emit_new(master::mirror(shape, dtype), fb::Op::IndexOp, [&](auto& b, uint64_t id) {
      return fb::CreateIndexOp(b, id, fb::IndexKind::IndexSelect, a.id, d, i.id).Union();
    });
  });
}
DistributedTensor DistributedTensor::gather(int64_t d, const DistributedTensor& index) const {
  const auto ops = operands("gather", *this, index);
  const Handle& a = ops[0];
  const Handle& i = ops[1];
  return ops.at_node([&]() -> DistributedTensor {
    const DType dtype = master::probe_of(a.meta()).gather(d, index_probe(i)).dtype();
    return ops.emit_new(master::mirror(i.meta().shape(), dtype), fb::Op::IndexOp, [&](auto& b, uint64_t id) {
      return fb::CreateIndexOp(b, id, fb::IndexKind::Gather, a.id, d, i.id).Union();
    });
  });
}

namespace {
// `Src`: a DistributedTensor to scatter from, or a Scalar to scatter.
template <typename Src>
DistributedTensor scatter_op(DistributedTensor& self, bool inplace, int64_t d, const DistributedTensor& index,
                             const Src& src) {
  constexpr bool from_tensor = std::same_as<Src, DistributedTensor>;
  const char* name = inplace ? "scatter_" : "scatter";
  const auto ops = [&] {
    if constexpr (from_tensor) {
      return operands(name, self, index, src);
    } else {
      return operands(name, self, index);
    }
  }();
  const Handle& a = ops[0];
  const Handle& i = ops[1];
  return ops.at_node([&]() -> DistributedTensor {
    Tensor pa = master::probe_of(a.meta());
    Scalar value = 0;
    uint64_t src_id = 0;
    if constexpr (from_tensor) {
      (void)pa.scatter(d, index_probe(i), master::probe_of(ops[2].meta()));
      src_id = ops[2].id;
    } else {
      (void)pa.scatter(d, index_probe(i), src);
      value = src;
    }
    const fb::Scalar v = fbs(value);
    return emit_new_or_inplace(ops, self, inplace, a.meta().shape(), a.meta().dtype(), fb::Op::Scatter,
                               [&](auto& b, uint64_t id) {
                                 return fb::CreateScatter(b, id, a.id, d, i.id, src_id, &v).Union();
                               });
  });
}
}  // namespace

DistributedTensor DistributedTensor::scatter(int64_t d, const DistributedTensor& index,
                                             const DistributedTensor& src) const {
  DistributedTensor self = *this;
  return scatter_op(self, false, d, index, src);
}
DistributedTensor DistributedTensor::scatter(int64_t d, const DistributedTensor& index, Scalar value) const {
  DistributedTensor self = *this;
  return scatter_op(self, false, d, index, value);
}
DistributedTensor& DistributedTensor::scatter_(int64_t d, const DistributedTensor& index,
                                               const DistributedTensor& src) {
  scatter_op(*this, true, d, index, src);
  return *this;
}
DistributedTensor& DistributedTensor::scatter_(int64_t d, const DistributedTensor& index, Scalar value) {
  scatter_op(*this, true, d, index, value);
  return *this;
}

DistributedTensor DistributedTensor::masked_fill(const DistributedTensor& mask, Scalar value) const {
  DistributedTensor self = *this;
  return masked_fill_op(self, false, mask, value);
}
DistributedTensor& DistributedTensor::masked_fill_(const DistributedTensor& mask, Scalar value) {
  masked_fill_op(*this, true, mask, value);
  return *this;
}

std::vector<DistributedTensor> DistributedTensor::split(const std::vector<int64_t>& sizes, int64_t d) const {
  const auto ops = operands("split", *this);
  const Handle& a = ops[0];
  return ops.at_node([&]() -> decltype(auto) {
    const std::vector<Tensor> metas = a.meta().split(sizes, d);  // views of the mirror: exact
    std::vector<DistributedTensor> out;
    std::vector<uint64_t> ids;
    for (const Tensor& m : metas) {
      out.emplace_back(ops.session->new_handle(a.node, a.device, m));
      ids.push_back(out.back().id());
    }
    ops.session->link(a.node, "split").append(fb::Op::Split, [&](auto& b) {
      return fb::CreateSplit(b, b.CreateVector(ids), a.id, d, b.CreateVector(sizes)).Union();
    });
    return out;
  });
}
std::vector<DistributedTensor> DistributedTensor::split(int64_t split_size, int64_t d) const {
  const Handle& a = operand(*this, "split");
  std::vector<int64_t> sizes;
  for (const Tensor& m : a.meta().split(split_size, d)) sizes.push_back(m.size(d));
  return split(sizes, d);
}
std::vector<DistributedTensor> DistributedTensor::chunk(int64_t chunks, int64_t d) const {
  const Handle& a = operand(*this, "chunk");
  std::vector<int64_t> sizes;
  for (const Tensor& m : a.meta().chunk(chunks, d)) sizes.push_back(m.size(d));
  return split(sizes, d);
}

namespace {
std::pair<DistributedTensor, DistributedTensor> sort_op(const DistributedTensor& x, const char* name, int64_t d,
                                                        bool descending, int64_t k, bool sorted) {
  const auto ops = operands(name, x);
  const Handle& a = ops[0];
  return ops.at_node([&]() -> std::pair<DistributedTensor, DistributedTensor> {
    Shape shape = a.meta().shape();
    if (k >= 0) {
      const int64_t w = master::wrap_dim(name, d, a.meta().dim());
      const int64_t size = shape.empty() ? 1 : shape[w];
      if (k > size) THD_THROW(IndexError, name, "k ({}) is larger than the size {} of dim {}", k, size, w);
      if (!shape.empty()) shape[w] = k;
      (void)master::probe_of(a.meta()).topk(std::min<int64_t>(k, 1), d, descending, sorted);
    } else {
      (void)master::probe_of(a.meta()).sort(d, descending);
    }
    auto values = ops.session->new_handle(a.node, a.device, master::mirror(shape, a.meta().dtype()));
    auto indices = ops.session->new_handle(a.node, a.device, master::mirror(shape, kInt64));
    ops.session->link(a.node, name).append(fb::Op::Sort, [&](auto& b) {
      return fb::CreateSort(b, values->id, indices->id, a.id, d, descending, k, sorted).Union();
    });
    return {DistributedTensor(std::move(values)), DistributedTensor(std::move(indices))};
  });
}
}  // namespace

std::pair<DistributedTensor, DistributedTensor> DistributedTensor::sort(int64_t d, bool descending) const {
  return sort_op(*this, "sort", d, descending, -1, true);
}
std::pair<DistributedTensor, DistributedTensor> DistributedTensor::topk(int64_t k, int64_t d, bool largest,
                                                                        bool sorted) const {
  if (k < 0) THD_THROW(ValueError, "topk", "k must be non-negative, got {}", k);
  return sort_op(*this, "topk", d, largest, k, sorted);
}

namespace {
DistributedTensor join(const char* name, fb::JoinKind kind, const std::vector<DistributedTensor>& tensors, int64_t d) {
  if (tensors.empty()) THD_THROW(ValueError, name, "expected a non-empty list of tensors");
  std::vector<const Handle*> hs;
  std::vector<Shape> shapes;
  std::vector<Tensor> probes;
  std::vector<uint64_t> ids;
  for (const auto& t : tensors) {
    hs.push_back(&operand(t, name));
    shapes.push_back(hs.back()->meta().shape());
    probes.push_back(master::probe_of(hs.back()->meta()));
    ids.push_back(hs.back()->id);
    master::check_same_node(name, {hs.front(), hs.back()});
  }
  auto s = session_of(*hs.front(), name);
  return master::at_node(hs.front()->node, [&]() -> decltype(auto) {
    for (const Handle* h : hs) master::check_same_device(name, {hs.front(), h});
    const Shape shape = kind == fb::JoinKind::Cat ? master::cat_shape(shapes, d) : master::stack_shape(shapes, d);
    const DType dtype = (kind == fb::JoinKind::Cat ? cat(probes, d) : stack(probes, d)).dtype();
    return emit_new(*s, name, hs.front()->node, master::mirror(shape, dtype, hs.front()->device), fb::Op::Join,
                    [&](auto& b, uint64_t id) { return fb::CreateJoin(b, id, kind, b.CreateVector(ids), d).Union(); });
  });
}
}  // namespace

DistributedTensor cat(const std::vector<DistributedTensor>& tensors, int64_t d) {
  return join("cat", fb::JoinKind::Cat, tensors, d);
}
DistributedTensor stack(const std::vector<DistributedTensor>& tensors, int64_t d) {
  return join("stack", fb::JoinKind::Stack, tensors, d);
}

DistributedTensor where(const DistributedTensor& cond, const DistributedTensor& x, const DistributedTensor& y) {
  const auto ops = operands("where", cond, x, y);
  const Handle& c = ops[0];
  const Handle& a = ops[1];
  const Handle& b = ops[2];
  return ops.at_node([&]() -> DistributedTensor {
    const Shape shape =
        master::broadcast_for("where", master::broadcast_for("where", c.meta().shape(), a.meta().shape()), b.meta().shape());
    const DType dtype = where(master::probe_of(c.meta()), master::probe_of(a.meta()), master::probe_of(b.meta())).dtype();
    const fb::Scalar zero;
    return ops.emit_new(master::mirror(shape, dtype), fb::Op::Where, [&](auto& bld, uint64_t id) {
      return fb::CreateWhere(bld, id, c.id, a.id, b.id, &zero, &zero).Union();
    });
  });
}
DistributedTensor where(const DistributedTensor& cond, Scalar x, Scalar y) {
  const auto ops = operands("where", cond);
  const Handle& c = ops[0];
  return ops.at_node([&]() -> DistributedTensor {
    const DType dtype = where(master::probe_of(c.meta()), x, y).dtype();
    const fb::Scalar sa = fbs(x), sb = fbs(y);
    return ops.emit_new(master::mirror(c.meta().shape(), dtype), fb::Op::Where, [&](auto& bld, uint64_t id) {
      return fb::CreateWhere(bld, id, c.id, 0, 0, &sa, &sb).Union();
    });
  });
}

// ---- operators
// ---------------------------------------------------------------------------
DistributedTensor operator+(const DistributedTensor& a, const DistributedTensor& b) { return a.add(b); }
DistributedTensor operator-(const DistributedTensor& a, const DistributedTensor& b) { return a.sub(b); }
DistributedTensor operator*(const DistributedTensor& a, const DistributedTensor& b) { return a.mul(b); }
DistributedTensor operator/(const DistributedTensor& a, const DistributedTensor& b) { return a.div(b); }
DistributedTensor operator+(const DistributedTensor& a, Scalar b) { return a.add(b); }
DistributedTensor operator-(const DistributedTensor& a, Scalar b) { return a.sub(b); }
DistributedTensor operator*(const DistributedTensor& a, Scalar b) { return a.mul(b); }
DistributedTensor operator/(const DistributedTensor& a, Scalar b) { return a.div(b); }
DistributedTensor operator+(Scalar a, const DistributedTensor& b) { return binary(fb::BinaryOp::Add, b, a, true); }
DistributedTensor operator-(Scalar a, const DistributedTensor& b) { return binary(fb::BinaryOp::Sub, b, a, true); }
DistributedTensor operator*(Scalar a, const DistributedTensor& b) { return binary(fb::BinaryOp::Mul, b, a, true); }
DistributedTensor operator/(Scalar a, const DistributedTensor& b) { return binary(fb::BinaryOp::Div, b, a, true); }
DistributedTensor operator-(const DistributedTensor& a) { return a.neg(); }
DistributedTensor& operator+=(DistributedTensor& a, const DistributedTensor& b) { return a.add_(b); }
DistributedTensor& operator-=(DistributedTensor& a, const DistributedTensor& b) { return a.sub_(b); }
DistributedTensor& operator*=(DistributedTensor& a, const DistributedTensor& b) { return a.mul_(b); }
DistributedTensor& operator/=(DistributedTensor& a, const DistributedTensor& b) { return a.div_(b); }
DistributedTensor& operator+=(DistributedTensor& a, Scalar b) { return a.add_(b); }
DistributedTensor& operator-=(DistributedTensor& a, Scalar b) { return a.sub_(b); }
DistributedTensor& operator*=(DistributedTensor& a, Scalar b) { return a.mul_(b); }
DistributedTensor& operator/=(DistributedTensor& a, Scalar b) { return a.div_(b); }

}  // namespace thd
