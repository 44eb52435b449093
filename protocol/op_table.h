// The elementwise ops of the schema (fb::UnaryOp, fb::BinaryOp), defined once for
// the master and the worker: each op's name and the tensor call it makes. The
// worker runs the call on a command's operands (worker/ops_math.cpp); the master
// runs the same call on probes to infer the result's dtype (master/infer.h), so
// the two cannot disagree. Adding an op is a value in the schema and a case in the
// switches below (the build refuses a switch that misses a value of its enum).
#pragma once

#include <concepts>

#include <thd/scalar.h>
#include <thd/tensor.h>

#include "protocol/codec.h"
#include "tensor/check.h"

namespace thd::protocol {

// "add", "neg": the schema's name of the op in snake case, the name its errors
// carry. ProtocolError for a value outside the enum.
const char* op_name(fb::UnaryOp op);
const char* op_name(fb::BinaryOp op);

// A kind a message names that this protocol version does not have.
[[noreturn]] void throw_unknown_kind(const char* family, int value);

// a.op()
inline Tensor call(fb::UnaryOp op, const Tensor& a) {
  switch (op) {
    case fb::UnaryOp::Neg: return a.neg();
    case fb::UnaryOp::Abs: return a.abs();
    case fb::UnaryOp::Exp: return a.exp();
    case fb::UnaryOp::Log: return a.log();
    case fb::UnaryOp::Sqrt: return a.sqrt();
    case fb::UnaryOp::Rsqrt: return a.rsqrt();
    case fb::UnaryOp::Sin: return a.sin();
    case fb::UnaryOp::Cos: return a.cos();
    case fb::UnaryOp::Tanh: return a.tanh();
    case fb::UnaryOp::Sigmoid: return a.sigmoid();
    case fb::UnaryOp::Relu: return a.relu();
    case fb::UnaryOp::Gelu: return a.gelu();
    case fb::UnaryOp::Contiguous: return a.contiguous();
    case fb::UnaryOp::Clone: return a.clone();
  }
  throw_unknown_kind("unary", static_cast<int>(op));
}

// a.op_(): ProtocolError for an op without an in-place form.
inline void call_(fb::UnaryOp op, Tensor& a) {
  switch (op) {
    case fb::UnaryOp::Neg: a.neg_(); return;
    case fb::UnaryOp::Abs: a.abs_(); return;
    case fb::UnaryOp::Exp: a.exp_(); return;
    case fb::UnaryOp::Log: a.log_(); return;
    case fb::UnaryOp::Sqrt: a.sqrt_(); return;
    case fb::UnaryOp::Rsqrt: a.rsqrt_(); return;
    case fb::UnaryOp::Sin: a.sin_(); return;
    case fb::UnaryOp::Cos: a.cos_(); return;
    case fb::UnaryOp::Tanh: a.tanh_(); return;
    case fb::UnaryOp::Sigmoid: a.sigmoid_(); return;
    case fb::UnaryOp::Relu: a.relu_(); return;
    case fb::UnaryOp::Gelu: a.gelu_(); return;
    case fb::UnaryOp::Contiguous:
    case fb::UnaryOp::Clone: THD_THROW(protocol::ProtocolError, op_name(op), "{} has no in-place form", op_name(op));
  }
  throw_unknown_kind("unary", static_cast<int>(op));
}

// a.op(b), `B` a Tensor or a Scalar (the tensor library spells both alike);
// maximum and minimum take a tensor only.
template <typename B>
  requires std::same_as<B, Tensor> || std::same_as<B, Scalar>
Tensor call(fb::BinaryOp op, const Tensor& a, const B& b) {
  switch (op) {
    case fb::BinaryOp::Add: return a.add(b);
    case fb::BinaryOp::Sub: return a.sub(b);
    case fb::BinaryOp::Mul: return a.mul(b);
    case fb::BinaryOp::Div: return a.div(b);
    case fb::BinaryOp::Pow: return a.pow(b);
    case fb::BinaryOp::Maximum:
      if constexpr (std::same_as<B, Tensor>) return a.maximum(b);
      THD_THROW(protocol::ProtocolError, op_name(op), "{} takes a tensor, not a number", op_name(op));
    case fb::BinaryOp::Minimum:
      if constexpr (std::same_as<B, Tensor>) return a.minimum(b);
      THD_THROW(protocol::ProtocolError, op_name(op), "{} takes a tensor, not a number", op_name(op));
    case fb::BinaryOp::Eq: return a.eq(b);
    case fb::BinaryOp::Ne: return a.ne(b);
    case fb::BinaryOp::Lt: return a.lt(b);
    case fb::BinaryOp::Le: return a.le(b);
    case fb::BinaryOp::Gt: return a.gt(b);
    case fb::BinaryOp::Ge: return a.ge(b);
  }
  throw_unknown_kind("binary", static_cast<int>(op));
}

// a.op_(b): ProtocolError for an op without an in-place form.
template <typename B>
  requires std::same_as<B, Tensor> || std::same_as<B, Scalar>
void call_(fb::BinaryOp op, Tensor& a, const B& b) {
  switch (op) {
    case fb::BinaryOp::Add: a.add_(b); return;
    case fb::BinaryOp::Sub: a.sub_(b); return;
    case fb::BinaryOp::Mul: a.mul_(b); return;
    case fb::BinaryOp::Div: a.div_(b); return;
    case fb::BinaryOp::Pow: a.pow_(b); return;
    case fb::BinaryOp::Maximum:
    case fb::BinaryOp::Minimum:
    case fb::BinaryOp::Eq:
    case fb::BinaryOp::Ne:
    case fb::BinaryOp::Lt:
    case fb::BinaryOp::Le:
    case fb::BinaryOp::Gt:
    case fb::BinaryOp::Ge: THD_THROW(protocol::ProtocolError, op_name(op), "{} has no in-place form", op_name(op));
  }
  throw_unknown_kind("binary", static_cast<int>(op));
}

// s op a, the reversed operators (2 - t, 1 / t): ProtocolError for an op without
// a scalar-first form.
inline Tensor call_reversed(fb::BinaryOp op, const Scalar& s, const Tensor& a) {
  switch (op) {
    case fb::BinaryOp::Add: return s + a;
    case fb::BinaryOp::Sub: return s - a;
    case fb::BinaryOp::Mul: return s * a;
    case fb::BinaryOp::Div: return s / a;
    case fb::BinaryOp::Pow:
    case fb::BinaryOp::Maximum:
    case fb::BinaryOp::Minimum:
    case fb::BinaryOp::Eq:
    case fb::BinaryOp::Ne:
    case fb::BinaryOp::Lt:
    case fb::BinaryOp::Le:
    case fb::BinaryOp::Gt:
    case fb::BinaryOp::Ge: THD_THROW(protocol::ProtocolError, op_name(op), "{} has no scalar-first form", op_name(op));
  }
  throw_unknown_kind("binary", static_cast<int>(op));
}

}  // namespace thd::protocol
