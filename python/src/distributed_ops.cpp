// The rest of thd.DistributedTensor's ops, with torch's names and defaults: math,
// reductions, linear algebra, views and indexing (t[1, :, ::2]), joining and
// sorting, and the free functions cat/stack/where and the eye/linspace/randint
// factories. Ops return at once (they run on the tensor's node), so each releases
// the GIL only for what may wait under flow control.
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include <thd/distributed.h>

#include "bindings.h"
#include "operand.h"

namespace thd::python {

namespace {

using DT = DistributedTensor;
using Unary = DT (DT::*)() const;
using UnaryInPlace = DT& (DT::*)();

template <Unary F, UnaryInPlace G>
void unary(py::class_<DT>& c, const char* name, const char* name_, const char* doc) {
  c.def(name, F, Release(), doc);
  c.def(name_, G, Release(), "In-place form; returns self.");
}

// One index of t[...]: applied to `t` at dim `dim`; returns the next dim to index.
int64_t apply_index(DT& t, int64_t dim, const py::handle& index) {
  if (py::isinstance<py::bool_>(index)) {
    throw TypeError("DistributedTensor.__getitem__: bool indices are not supported; use masked_fill or where",
                    ErrorContext{.op = "__getitem__"});
  }
  if (py::isinstance<py::int_>(index)) {
    t = t.select(dim, index.cast<int64_t>());
    return dim;
  }
  if (py::isinstance<py::slice>(index)) {
    size_t start = 0, stop = 0, step = 0, length = 0;
    if (!py::reinterpret_borrow<py::slice>(index).compute(static_cast<size_t>(t.size(dim)), &start, &stop, &step,
                                                          &length)) {
      throw py::error_already_set();
    }
    const auto s = static_cast<int64_t>(step);
    if (s <= 0) {
      throw ValueError("DistributedTensor.__getitem__: slice steps must be positive (as torch's)",
                       ErrorContext{.op = "__getitem__"});
    }
    const auto begin = static_cast<int64_t>(start);
    t = t.slice(dim, begin, begin + static_cast<int64_t>(length) * s, s);
    return dim + 1;
  }
  if (index.is_none()) {
    t = t.unsqueeze(dim);
    return dim + 1;
  }
  throw TypeError(std::string("DistributedTensor.__getitem__: only ints, slices, None and ... index a tensor; got ") +
                      std::string(py::str(py::type::of(index).attr("__name__"))) +
                      " (use index_select, gather or masked_fill)",
                  ErrorContext{.op = "__getitem__"});
}

// Basic indexing, as torch: every result is a view of the tensor.
DT getitem(const DT& t, const py::object& key) {
  py::tuple keys = py::isinstance<py::tuple>(key) ? py::reinterpret_borrow<py::tuple>(key) : py::make_tuple(key);
  int64_t consumed = 0;  // indices that take a dim (not None, not ...)
  size_t ellipses = 0;
  for (const py::handle k : keys) {
    if (k.is(py::ellipsis())) ++ellipses;
    else if (!k.is_none()) ++consumed;
  }
  if (ellipses > 1) throw ValueError("DistributedTensor.__getitem__: at most one ...", ErrorContext{.op = "__getitem__"});
  if (consumed > t.dim()) {
    throw IndexError("DistributedTensor.__getitem__: " + std::to_string(consumed) + " indices for a tensor of " +
                         std::to_string(t.dim()) + " dims",
                     ErrorContext{.op = "__getitem__"});
  }
  DT out = t;
  int64_t dim = 0;
  for (const py::handle k : keys) {
    if (k.is(py::ellipsis())) {
      dim += t.dim() - consumed;
      continue;
    }
    dim = apply_index(out, dim, k);
  }
  return out;
}

// `base ** exponent` for a number base, as torch: the base becomes a 0-dim tensor,
// on the exponent's node and device, of the dtype torch's promotion gives the result
// (an int base keeps an int or floating exponent's dtype, a float base makes an
// integral exponent float32).
DT scalar_pow(Scalar base, const DT& exponent) {
  const DType e = exponent.dtype();
  DType dtype = e;
  if (base.is_floating_point() && !is_floating_point(e)) {
    dtype = kFloat32;
  } else if (base.is_integral() && e == kBool) {
    dtype = kInt64;
  }
  NodeScope on(exponent.node());
  return DT::full({}, base, dtype, exponent.device()).pow(exponent);
}

// b * alpha for add's and sub's alpha, in int64 when both are integral.
Scalar scaled(Scalar b, Scalar alpha) {
  if (!b.is_floating_point() && !alpha.is_floating_point()) return Scalar(b.to_int64() * alpha.to_int64());
  return Scalar(b.to_double() * alpha.to_double());
}

bool is_one(Scalar s) { return s.is_floating_point() ? s.to_double() == 1.0 : s.to_int64() == 1; }

// torch's a.add(other, alpha=...) and a.sub(...): a +- alpha * other.
template <bool Subtract>
DT add_scaled(const DT& a, py::handle other, Scalar alpha, const char* name) {
  DT out;
  const bool ok = with_operand(
      other, out,
      [&](const DT& t) {
        if (is_one(alpha)) return Subtract ? a - t : a + t;
        return Subtract ? a - t * alpha : a + t * alpha;
      },
      [&](Scalar s) {
        const Scalar b = is_one(alpha) ? s : scaled(s, alpha);
        return Subtract ? a - b : a + b;
      });
  if (!ok) refuse_operand(a, other, name);
  return out;
}

// torch's a.add_(other, alpha=...) and a.sub_(...), returning self. One positional
// Python number takes fast_inplace.cpp's path instead; this is every other call.
template <bool Subtract>
void bind_add_scaled_in_place(py::class_<DT>& c, const char* name, const char* doc) {
  c.def(name, [name](py::object self, py::handle other, Scalar alpha) {
    DT& a = self.cast<DT&>();
    int done = 0;
    const bool ok = with_operand(
        other, done,
        [&](const DT& t) {
          if (is_one(alpha)) return (Subtract ? a.sub_(t) : a.add_(t), 1);
          return (Subtract ? a.sub_(t * alpha) : a.add_(t * alpha), 1);
        },
        [&](Scalar s) {
          const Scalar b = is_one(alpha) ? s : scaled(s, alpha);
          return (Subtract ? a.sub_(b) : a.add_(b), 1);
        });
    if (!ok) refuse_operand(a, other, name);
    return self;
  }, py::arg("other"), py::kw_only(), py::arg("alpha") = 1, doc);
}

// A torch method of one operand (mul, eq, ...): a tensor or a number.
template <typename F>
void bind_method(py::class_<DT>& c, const char* name, F op, const char* doc) {
  c.def(name, [op, name](const DT& a, py::handle other) {
    DT out;
    if (!with_operand(other, out, [&](const DT& t) { return op(a, t); }, [&](Scalar s) { return op(a, s); })) {
      refuse_operand(a, other, name);
    }
    return out;
  }, py::arg("other"), doc);
}

// The method forms of the operators, with torch's names and keywords.
void bind_operator_methods(py::class_<DT>& c) {
  c.def("add", [](const DT& a, py::handle other, Scalar alpha) { return add_scaled<false>(a, other, alpha, "add"); },
        py::arg("other"), py::kw_only(), py::arg("alpha") = 1,
        "self + alpha * other (a DistributedTensor on the same node or a number), broadcast and promoted as torch's.");
  c.def("sub", [](const DT& a, py::handle other, Scalar alpha) { return add_scaled<true>(a, other, alpha, "sub"); },
        py::arg("other"), py::kw_only(), py::arg("alpha") = 1, "self - alpha * other, as add().");
  bind_method(c, "mul", [](const DT& a, const auto& b) { return a * b; }, "self * other, as add().");
  bind_add_scaled_in_place<false>(c, "add_",
                                  "Adds alpha * other (a tensor or a number; alpha=1 by default) in place and returns "
                                  "self.");
  bind_add_scaled_in_place<true>(c, "sub_", "Subtracts alpha * other in place and returns self, as add_().");
  c.def("div", [](const DT& a, py::handle other, const std::optional<std::string>& rounding_mode) {
    if (rounding_mode) {
      throw ValueError("rounding_mode='" + *rounding_mode +
                           "' is not supported (thd has no floor or trunc op); only true division, rounding_mode=None",
                       ErrorContext{.op = "DistributedTensor.div", .node = a.node()});
    }
    DT out;
    if (!with_operand(other, out, [&](const DT& t) { return a / t; }, [&](Scalar s) { return a / s; })) {
      refuse_operand(a, other, "div");
    }
    return out;
  }, py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none(),
        "self / other, true division (integral tensors give float32), as add(); rounding_mode must be None.");
  bind_method(c, "eq", [](const DT& a, const auto& b) { return a.eq(b); }, "self == other, a bool tensor.");
  bind_method(c, "ne", [](const DT& a, const auto& b) { return a.ne(b); }, "self != other, a bool tensor.");
  bind_method(c, "lt", [](const DT& a, const auto& b) { return a.lt(b); }, "self < other, a bool tensor.");
  bind_method(c, "le", [](const DT& a, const auto& b) { return a.le(b); }, "self <= other, a bool tensor.");
  bind_method(c, "gt", [](const DT& a, const auto& b) { return a.gt(b); }, "self > other, a bool tensor.");
  bind_method(c, "ge", [](const DT& a, const auto& b) { return a.ge(b); }, "self >= other, a bool tensor.");
}

void bind_math(py::class_<DT>& c) {
  bind_operator_methods(c);
  c.def("pow", py::overload_cast<const DT&>(&DT::pow, py::const_), py::arg("exponent"), Release(),
        "Elementwise power.");
  c.def("pow", py::overload_cast<Scalar>(&DT::pow, py::const_), py::arg("exponent"), Release());
  bind_binary_operator(c, "__pow__", "**", [](const DT& a, const auto& b) { return a.pow(b); });
  bind_reflected_operator(c, "__rpow__", "**", [](const auto& base, const DT& exponent) {
    if constexpr (std::is_same_v<std::decay_t<decltype(base)>, Scalar>) {
      return scalar_pow(base, exponent);
    } else {
      return base.pow(exponent);
    }
  });
  c.def("pow_", py::overload_cast<const DT&>(&DT::pow_), py::arg("exponent"), Release(), "In-place pow.");
  c.def("pow_", py::overload_cast<Scalar>(&DT::pow_), py::arg("exponent"), Release());
  c.def("maximum", &DT::maximum, py::arg("other"), Release(), "Elementwise maximum (NaN propagates).");
  c.def("minimum", &DT::minimum, py::arg("other"), Release(), "Elementwise minimum (NaN propagates).");
  bind_inplace(c, "mul_", [](DT& a, const auto& b) { a.mul_(b); }, /*is_operator=*/false, "In-place product.");
  bind_inplace(c, "div_", [](DT& a, const auto& b) { a.div_(b); }, /*is_operator=*/false, "In-place division.");
  c.def("copy_", &DT::copy_, py::arg("src"), Release(),
        "Copies `src` (broadcast to this shape, converted to this dtype) into this tensor; both on one node.");
  unary<&DT::neg, &DT::neg_>(c, "neg", "neg_", "-x.");
  unary<&DT::abs, &DT::abs_>(c, "abs", "abs_", "|x|.");
  c.def("__abs__", [](const DT& a) { return a.abs(); }, Release());
  unary<&DT::exp, &DT::exp_>(c, "exp", "exp_", "e**x.");
  unary<&DT::log, &DT::log_>(c, "log", "log_", "The natural logarithm.");
  unary<&DT::sqrt, &DT::sqrt_>(c, "sqrt", "sqrt_", "The square root.");
  unary<&DT::rsqrt, &DT::rsqrt_>(c, "rsqrt", "rsqrt_", "1 / sqrt(x).");
  unary<&DT::sin, &DT::sin_>(c, "sin", "sin_", "The sine.");
  unary<&DT::cos, &DT::cos_>(c, "cos", "cos_", "The cosine.");
  unary<&DT::tanh, &DT::tanh_>(c, "tanh", "tanh_", "The hyperbolic tangent.");
  unary<&DT::sigmoid, &DT::sigmoid_>(c, "sigmoid", "sigmoid_", "1 / (1 + e**-x).");
  unary<&DT::relu, &DT::relu_>(c, "relu", "relu_", "max(x, 0).");
  unary<&DT::gelu, &DT::gelu_>(c, "gelu", "gelu_", "GELU (the erf form, torch's default).");
  c.def("clamp", &DT::clamp, py::arg("min") = py::none(), py::arg("max") = py::none(), Release(),
        "Every element limited to [min, max] (either may be None).");
  c.def("clamp_", &DT::clamp_, py::arg("min") = py::none(), py::arg("max") = py::none(), Release(),
        "In-place clamp.");
}

template <DT (DT::*All)() const, DT (DT::*Over)(int64_t, bool) const>
DT arg_reduce(const DT& t, std::optional<int64_t> dim, bool keepdim) {
  py::gil_scoped_release release;
  return dim ? (t.*Over)(*dim, keepdim) : (t.*All)();
}

template <DT (DT::*All)() const, DT (DT::*Over)(const Dims&, int64_t, bool) const>
DT spread(const DT& t, const py::object& dim, int64_t correction, bool keepdim, const char* op) {
  const bool all = dim.is_none() && !keepdim && correction == 1;
  const Dims dims = dims_from_object(dim, op);
  py::gil_scoped_release release;
  return all ? (t.*All)() : (t.*Over)(dims, correction, keepdim);
}

void bind_reductions(py::class_<DT>& c) {
  c.def("prod", [](const DT& t, const py::object& dim, bool keepdim) {
    return reduce<&DT::prod, &DT::prod>(t, dim, keepdim, "prod");
  }, py::arg("dim") = py::none(), py::arg("keepdim") = false, "The product, as sum().");
  c.def("any", [](const DT& t, const py::object& dim, bool keepdim) {
    return reduce<&DT::any, &DT::any>(t, dim, keepdim, "any");
  }, py::arg("dim") = py::none(), py::arg("keepdim") = false, "True where any element is nonzero, as sum().");
  c.def("all", [](const DT& t, const py::object& dim, bool keepdim) {
    return reduce<&DT::all, &DT::all>(t, dim, keepdim, "all");
  }, py::arg("dim") = py::none(), py::arg("keepdim") = false, "True where every element is nonzero, as sum().");
  c.def("argmax", &arg_reduce<&DT::argmax, &DT::argmax>, py::arg("dim") = py::none(), py::arg("keepdim") = false,
        "The index of the largest element (of the flattened tensor when dim is None).");
  c.def("argmin", &arg_reduce<&DT::argmin, &DT::argmin>, py::arg("dim") = py::none(), py::arg("keepdim") = false,
        "The index of the smallest element (of the flattened tensor when dim is None).");
  c.def("var", [](const DT& t, const py::object& dim, int64_t correction, bool keepdim) {
    return spread<&DT::var, &DT::var>(t, dim, correction, keepdim, "var");
  }, py::arg("dim") = py::none(), py::kw_only(), py::arg("correction") = 1, py::arg("keepdim") = false,
        "The variance (Bessel's correction by default, as torch).");
  c.def("std", [](const DT& t, const py::object& dim, int64_t correction, bool keepdim) {
    return spread<&DT::std, &DT::std>(t, dim, correction, keepdim, "std");
  }, py::arg("dim") = py::none(), py::kw_only(), py::arg("correction") = 1, py::arg("keepdim") = false,
        "The standard deviation, as var().");
  c.def("norm", [](const DT& t, double p, const py::object& dim, bool keepdim) {
    const Dims dims = dims_from_object(dim, "norm");
    py::gil_scoped_release release;
    return dim.is_none() && !keepdim ? t.norm(p) : t.norm(p, dims, keepdim);
  }, py::arg("p") = 2.0, py::arg("dim") = py::none(), py::arg("keepdim") = false, "The p-norm.");
  c.def("softmax", &DT::softmax, py::arg("dim"), Release(), "softmax over `dim`.");
  c.def("log_softmax", &DT::log_softmax, py::arg("dim"), Release(), "log(softmax) over `dim`, computed stably.");
}

void bind_linear_algebra(py::class_<DT>& c) {
  c.def("mm", &DT::mm, py::arg("mat2"), Release(), "The product of two matrices.");
  c.def("bmm", &DT::bmm, py::arg("mat2"), Release(), "Batched matrix product of [b, n, m] and [b, m, p].");
  c.def("addmm", &DT::addmm, py::arg("mat1"), py::arg("mat2"), py::kw_only(), py::arg("beta") = 1,
        py::arg("alpha") = 1, Release(), "beta * self + alpha * (mat1 @ mat2).");
  c.def("dot", &DT::dot, py::arg("other"), Release(), "The dot product of two vectors.");
  c.def("outer", &DT::outer, py::arg("vec2"), Release(), "The outer product of two vectors.");
}

void bind_views(py::class_<DT>& c) {
  c.def("__getitem__", &getitem, py::arg("key"),
        "Basic indexing as torch: ints select, slices (positive steps) narrow, None adds a dim, ... skips dims; "
        "the result is a view.");
  c.def("flatten", &DT::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1, "Dims start..end as one.");
  c.def("permute", [](const DT& t, const py::args& dims) { return t.permute(shape_from_args(dims, "permute")); },
        "A view with the dims in the given order: t.permute(2, 0, 1).");
  c.def("narrow", &DT::narrow, py::arg("dim"), py::arg("start"), py::arg("length"), "A view of `length` along dim.");
  c.def("select", &DT::select, py::arg("dim"), py::arg("index"), "A view of one index of `dim` (the dim goes).");
  c.def("expand", [](const DT& t, const py::args& s) { return t.expand(shape_from_args(s, "expand")); },
        "A broadcast view (-1 keeps a size).");
  c.def("expand_as", &DT::expand_as, py::arg("other"), "expand to other's shape.");
  c.def("squeeze", [](const DT& t, std::optional<int64_t> dim) { return dim ? t.squeeze(*dim) : t.squeeze(); },
        py::arg("dim") = py::none(), "Without the dims of size 1 (or only `dim`, if it is 1).");
  c.def("unsqueeze", &DT::unsqueeze, py::arg("dim"), "With a new dim of size 1 at `dim`.");
}

void bind_indexing(py::class_<DT>& c) {
  c.def("gather", &DT::gather, py::arg("dim"), py::arg("index"), Release(), "torch.gather.");
  c.def("scatter", py::overload_cast<int64_t, const DT&, const DT&>(&DT::scatter, py::const_), py::arg("dim"),
        py::arg("index"), py::arg("src"), Release(), "torch.scatter (src a tensor or a number).");
  c.def("scatter", py::overload_cast<int64_t, const DT&, Scalar>(&DT::scatter, py::const_), py::arg("dim"),
        py::arg("index"), py::arg("value"), Release());
  c.def("scatter_", py::overload_cast<int64_t, const DT&, const DT&>(&DT::scatter_), py::arg("dim"),
        py::arg("index"), py::arg("src"), Release(), "In-place scatter.");
  c.def("scatter_", py::overload_cast<int64_t, const DT&, Scalar>(&DT::scatter_), py::arg("dim"), py::arg("index"),
        py::arg("value"), Release());
  c.def("masked_fill", &DT::masked_fill, py::arg("mask"), py::arg("value"), Release(),
        "`value` where the bool `mask` is true.");
  c.def("masked_fill_", &DT::masked_fill_, py::arg("mask"), py::arg("value"), Release(), "In-place masked_fill.");
  c.def("split", [](const DT& t, const py::object& size, int64_t dim) {
    if (py::isinstance<py::int_>(size)) return t.split(size.cast<int64_t>(), dim);
    return t.split(size.cast<std::vector<int64_t>>(), dim);
  }, py::arg("split_size_or_sections"), py::arg("dim") = 0, "Views of equal size (an int) or of the given sizes.");
  c.def("chunk", &DT::chunk, py::arg("chunks"), py::arg("dim") = 0, "`chunks` views of (nearly) equal size.");
  c.def("sort", [](const DT& t, int64_t dim, bool descending) {
    std::pair<DT, DT> r = [&] {
      py::gil_scoped_release release;
      return t.sort(dim, descending);
    }();
    return py::module_::import("thd.return_types").attr("sort")(std::move(r.first), std::move(r.second));
  }, py::arg("dim") = -1, py::arg("descending") = false,
        "(values, indices) sorted along dim, as thd.return_types.sort.");
  c.def("topk", [](const DT& t, int64_t k, int64_t dim, bool largest, bool sorted) {
    std::pair<DT, DT> r = [&] {
      py::gil_scoped_release release;
      return t.topk(k, dim, largest, sorted);
    }();
    return py::module_::import("thd.return_types").attr("topk")(std::move(r.first), std::move(r.second));
  }, py::arg("k"), py::arg("dim") = -1, py::arg("largest") = true, py::arg("sorted") = true,
        "(values, indices) of the k largest (or smallest) along dim, as thd.return_types.topk.");
}


void bind_free_functions(py::module_& m) {
  m.def("cat", [](const std::vector<DT>& t, int64_t dim) { return cat(t, dim); }, py::arg("tensors"),
        py::arg("dim") = 0, Release(), "Tensors (all on one node) joined along an existing dim.");
  m.def("stack", [](const std::vector<DT>& t, int64_t dim) { return stack(t, dim); }, py::arg("tensors"),
        py::arg("dim") = 0, Release(), "Tensors (all on one node) joined along a new dim.");
  m.def("where", py::overload_cast<const DT&, const DT&, const DT&>(&where), py::arg("condition"), py::arg("input"),
        py::arg("other"), Release(), "input where condition is true, else other (tensors or numbers).");
  m.def("where", py::overload_cast<const DT&, Scalar, Scalar>(&where), py::arg("condition"), py::arg("input"),
        py::arg("other"), Release());
  m.def("_eye", [](int64_t n, int64_t mcols, DType d, std::optional<int> node) {
    return on_node(node, [&] { return DT::eye(n, mcols, d); });
  }, Release());
  m.def("_linspace", [](Scalar start, Scalar end, int64_t steps, DType d, std::optional<int> node) {
    return on_node(node, [&] { return DT::linspace(start, end, steps, d); });
  }, Release());
  m.def("_randint", [](int64_t low, int64_t high, const Shape& s, DType d, std::optional<int> node) {
    return on_node(node, [&] { return DT::randint(low, high, s, d); });
  }, Release());
}

}  // namespace

void bind_distributed_ops(py::module_& m) {
  auto c = py::reinterpret_borrow<py::class_<DT>>(m.attr("DistributedTensor"));
  bind_math(c);
  bind_reductions(c);
  bind_linear_algebra(c);
  bind_views(c);
  bind_indexing(c);
  bind_free_functions(m);
}

}  // namespace thd::python
