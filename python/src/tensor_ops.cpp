// thd.Tensor's arithmetic, matmul and comparisons: Python's operators over the C++
// local tensor's ops (include/thd/tensor.h), computed in this process with torch's
// broadcasting and type promotion. The tensor forms come before the number forms,
// so a tensor operand is never read as a number; a NumPy array or torch tensor
// operand is taken as a thd.Tensor sharing its memory, last.
#include <optional>
#include <type_traits>

#include "bindings.h"

namespace thd::python {

namespace {

using T = Tensor;
// Local ops on large tensors take a while: other Python threads run meanwhile.

// An in-place op that returns self, the same Python object, as torch's do.
template <typename Other, typename F>
void in_place(py::class_<T>& c, const char* name, F f, const char* arg, const char* doc = "") {
  auto op = [f](const py::object& self, Other other) {
    T& t = self.cast<T&>();
    {
      py::gil_scoped_release release;
      f(t, other);
    }
    return self;
  };
  // An operator's arg is unnamed: a wrong operand type gives NotImplemented.
  if (arg == nullptr) {
    c.def(name, op, py::is_operator());
  } else {
    c.def(name, op, py::arg(arg), doc);
  }
}

// A NumPy array or a torch tensor (any object with __array__ or __dlpack__) as a
// thd.Tensor sharing its memory (thd._as_local); nullopt for anything else: a list,
// which torch's operators refuse too, a DistributedTensor, whose reflected operator
// names the upload, or an unrelated object (NotImplemented, so == falls back to
// identity).
std::optional<T> local_array(py::handle other, const char* op) {
  if (PyList_Check(other.ptr()) || PyTuple_Check(other.ptr()) || py::isinstance<DistributedTensor>(other)) {
    return std::nullopt;
  }
  if (!py::hasattr(other, "__array__") && !py::hasattr(other, "__dlpack__")) return std::nullopt;
  return py::module_::import("thd").attr("_as_local")(other, op).cast<T>();
}

// The last overload of an operator, after the tensor and the number forms: a NumPy
// scalar (read as a number, as the number form does on pybind11's second pass) or a
// local array, computed with torch's promotion, so `t + ndarray`, `ndarray + t` and
// `t += ndarray` give thd.Tensors, as torch's do, instead of NumPy results (or, in
// place, rebinding t to an ndarray). `reflected`: op(other, self).
template <typename F>
void bind_array_operand(py::class_<T>& c, const char* name, bool reflected, F op) {
  c.def(name, [op, name, reflected](const T& a, py::handle other) -> py::object {
    py::detail::make_caster<Scalar> number;
    if (number.load(other, /*convert=*/true)) {
      const Scalar s = py::detail::cast_op<Scalar>(number);
      py::gil_scoped_release release;
      if constexpr (std::is_invocable_v<F, Scalar, const T&>) {
        return py::cast(reflected ? op(s, a) : op(a, s));
      } else {
        return py::cast(op(a, s));
      }
    }
    std::optional<T> b = local_array(other, name);
    if (!b) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    py::gil_scoped_release release;
    return py::cast(reflected ? op(*b, a) : op(a, *b));
  }, py::is_operator());
}

// In place with a local array (or a NumPy scalar): self keeps its dtype and memory.
template <typename F>
void bind_array_operand_in_place(py::class_<T>& c, const char* name, F op) {
  c.def(name, [op, name](const py::object& self, py::handle other) -> py::object {
    T& a = self.cast<T&>();
    py::detail::make_caster<Scalar> number;
    if (number.load(other, /*convert=*/true)) {
      const Scalar s = py::detail::cast_op<Scalar>(number);
      py::gil_scoped_release release;
      op(a, s);
      return self;
    }
    std::optional<T> b = local_array(other, name);
    if (!b) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    {
      py::gil_scoped_release release;
      op(a, *b);
    }
    return self;
  }, py::is_operator());
}

void bind_local_array_operands(py::class_<T>& c) {
  // As torch: NumPy's binary operators defer to the tensor's reflected ones, while
  // NumPy functions (np.exp(t)) still take it through __array__.
  c.attr("__array_priority__") = 1000;
  bind_array_operand(c, "__add__", false, [](const auto& a, const auto& b) { return a + b; });
  bind_array_operand(c, "__radd__", true, [](const auto& a, const auto& b) { return a + b; });
  bind_array_operand(c, "__sub__", false, [](const auto& a, const auto& b) { return a - b; });
  bind_array_operand(c, "__rsub__", true, [](const auto& a, const auto& b) { return a - b; });
  bind_array_operand(c, "__mul__", false, [](const auto& a, const auto& b) { return a * b; });
  bind_array_operand(c, "__rmul__", true, [](const auto& a, const auto& b) { return a * b; });
  bind_array_operand(c, "__truediv__", false, [](const auto& a, const auto& b) { return a / b; });
  bind_array_operand(c, "__rtruediv__", true, [](const auto& a, const auto& b) { return a / b; });
  bind_array_operand(c, "__pow__", false, [](const T& a, const auto& b) { return a.pow(b); });
  bind_array_operand(c, "__eq__", false, [](const T& a, const auto& b) { return a.eq(b); });
  bind_array_operand(c, "__ne__", false, [](const T& a, const auto& b) { return a.ne(b); });
  bind_array_operand(c, "__lt__", false, [](const T& a, const auto& b) { return a.lt(b); });
  bind_array_operand(c, "__le__", false, [](const T& a, const auto& b) { return a.le(b); });
  bind_array_operand(c, "__gt__", false, [](const T& a, const auto& b) { return a.gt(b); });
  bind_array_operand(c, "__ge__", false, [](const T& a, const auto& b) { return a.ge(b); });
  c.def("__rmatmul__", [](const T& a, py::handle other) -> py::object {
    std::optional<T> b = local_array(other, "__rmatmul__");
    if (!b) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    py::gil_scoped_release release;
    return py::cast(b->matmul(a));
  }, py::is_operator());
  c.def("__matmul__", [](const T& a, py::handle other) -> py::object {
    std::optional<T> b = local_array(other, "__matmul__");
    if (!b) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    py::gil_scoped_release release;
    return py::cast(a.matmul(*b));
  }, py::is_operator());
  bind_array_operand_in_place(c, "__iadd__", [](T& a, const auto& b) { a += b; });
  bind_array_operand_in_place(c, "__isub__", [](T& a, const auto& b) { a -= b; });
  bind_array_operand_in_place(c, "__imul__", [](T& a, const auto& b) { a *= b; });
  bind_array_operand_in_place(c, "__itruediv__", [](T& a, const auto& b) { a /= b; });
}

}  // namespace

void bind_tensor_ops(py::module_& m) {
  auto c = py::reinterpret_borrow<py::class_<T>>(m.attr("Tensor"));

  c.def("__add__", [](const T& a, const T& b) { return a + b; }, py::is_operator(), Release());
  c.def("__add__", [](const T& a, Scalar b) { return a + b; }, py::is_operator(), Release());
  c.def("__radd__", [](const T& a, Scalar b) { return b + a; }, py::is_operator(), Release());
  c.def("__sub__", [](const T& a, const T& b) { return a - b; }, py::is_operator(), Release());
  c.def("__sub__", [](const T& a, Scalar b) { return a - b; }, py::is_operator(), Release());
  c.def("__rsub__", [](const T& a, Scalar b) { return b - a; }, py::is_operator(), Release());
  c.def("__mul__", [](const T& a, const T& b) { return a * b; }, py::is_operator(), Release());
  c.def("__mul__", [](const T& a, Scalar b) { return a * b; }, py::is_operator(), Release());
  c.def("__rmul__", [](const T& a, Scalar b) { return b * a; }, py::is_operator(), Release());
  c.def("__truediv__", [](const T& a, const T& b) { return a / b; }, py::is_operator(), Release());
  c.def("__truediv__", [](const T& a, Scalar b) { return a / b; }, py::is_operator(), Release());
  c.def("__rtruediv__", [](const T& a, Scalar b) { return b / a; }, py::is_operator(), Release());
  c.def("__pow__", [](const T& a, const T& b) { return a.pow(b); }, py::is_operator(), Release());
  c.def("__pow__", [](const T& a, Scalar b) { return a.pow(b); }, py::is_operator(), Release());
  c.def("__matmul__", [](const T& a, const T& b) { return a.matmul(b); }, py::is_operator(), Release());
  c.def("__neg__", [](const T& a) { return -a; }, Release());

  // In place: the result keeps self's dtype and shape (thd.TypeError when the
  // promoted result cannot be cast back, as torch's), writes through to memory
  // shared with NumPy or torch, and returns self itself.
  in_place<const T&>(c, "__iadd__", [](T& a, const T& b) { a += b; }, nullptr);
  in_place<Scalar>(c, "__iadd__", [](T& a, Scalar b) { a += b; }, nullptr);
  in_place<const T&>(c, "__isub__", [](T& a, const T& b) { a -= b; }, nullptr);
  in_place<Scalar>(c, "__isub__", [](T& a, Scalar b) { a -= b; }, nullptr);
  in_place<const T&>(c, "__imul__", [](T& a, const T& b) { a *= b; }, nullptr);
  in_place<Scalar>(c, "__imul__", [](T& a, Scalar b) { a *= b; }, nullptr);
  in_place<const T&>(c, "__itruediv__", [](T& a, const T& b) { a /= b; }, nullptr);
  in_place<Scalar>(c, "__itruediv__", [](T& a, Scalar b) { a /= b; }, nullptr);

  c.def("add", py::overload_cast<const T&>(&T::add, py::const_), py::arg("other"), Release(),
        "self + other (a tensor or a number), broadcast and promoted as torch's.");
  c.def("add", py::overload_cast<Scalar>(&T::add, py::const_), py::arg("other"), Release());
  c.def("sub", py::overload_cast<const T&>(&T::sub, py::const_), py::arg("other"), Release(), "self - other.");
  c.def("sub", py::overload_cast<Scalar>(&T::sub, py::const_), py::arg("other"), Release());
  c.def("mul", py::overload_cast<const T&>(&T::mul, py::const_), py::arg("other"), Release(), "self * other.");
  c.def("mul", py::overload_cast<Scalar>(&T::mul, py::const_), py::arg("other"), Release());
  c.def("div", py::overload_cast<const T&>(&T::div, py::const_), py::arg("other"), Release(),
        "self / other, true division (integers give float32).");
  c.def("div", py::overload_cast<Scalar>(&T::div, py::const_), py::arg("other"), Release());
  in_place<const T&>(c, "add_", [](T& a, const T& b) { a.add_(b); }, "other", "Adds in place; returns self.");
  in_place<Scalar>(c, "add_", [](T& a, Scalar b) { a.add_(b); }, "other");
  in_place<const T&>(c, "sub_", [](T& a, const T& b) { a.sub_(b); }, "other", "Subtracts in place; returns self.");
  in_place<Scalar>(c, "sub_", [](T& a, Scalar b) { a.sub_(b); }, "other");
  in_place<const T&>(c, "mul_", [](T& a, const T& b) { a.mul_(b); }, "other", "Multiplies in place; returns self.");
  in_place<Scalar>(c, "mul_", [](T& a, Scalar b) { a.mul_(b); }, "other");
  in_place<const T&>(c, "div_", [](T& a, const T& b) { a.div_(b); }, "other", "Divides in place; returns self.");
  in_place<Scalar>(c, "div_", [](T& a, Scalar b) { a.div_(b); }, "other");
  in_place<Scalar>(c, "fill_", [](T& a, Scalar v) { a.fill_(v); }, "value",
                   "Sets every element to `value`; returns self.");
  in_place<const T&>(c, "copy_", [](T& a, const T& src) { a.copy_(src); }, "src",
                     "Copies `src` (broadcast to self's shape, converted to its dtype) into self; returns self.");
  c.def("matmul", &T::matmul, py::arg("other"), Release(), "Matrix product (torch.matmul); also `a @ b`.");
  c.def("sum", [](const T& t) { return t.sum(); }, Release(),
        "The sum of every element, a 0-dim tensor (integers and bool sum in int64).");
  c.def("contiguous", &T::contiguous, "The tensor itself when contiguous, else a contiguous copy.");
  c.def("transpose", &T::transpose, py::arg("dim0"), py::arg("dim1"), "A view with dims dim0 and dim1 swapped.");
  c.def("t", &T::t, "The transpose of a tensor of at most 2 dims (a view).");
  c.def("is_contiguous", &T::is_contiguous, "Whether its elements lie in row-major order without gaps.");
  c.def("stride", [](const T& t) { return py::tuple(py::cast(t.strides())); },
        "The strides of its dims, in elements, a tuple of ints.");
  c.def("data_ptr", [](const T& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); },
        "The address of its first element, an int (as torch's).");

  // Comparisons give bool tensors.
  c.def("__eq__", [](const T& a, const T& b) { return a.eq(b); }, py::is_operator(), Release());
  c.def("__eq__", [](const T& a, Scalar b) { return a.eq(b); }, py::is_operator(), Release());
  c.def("__ne__", [](const T& a, const T& b) { return a.ne(b); }, py::is_operator(), Release());
  c.def("__ne__", [](const T& a, Scalar b) { return a.ne(b); }, py::is_operator(), Release());
  c.def("__lt__", [](const T& a, const T& b) { return a.lt(b); }, py::is_operator(), Release());
  c.def("__lt__", [](const T& a, Scalar b) { return a.lt(b); }, py::is_operator(), Release());
  c.def("__le__", [](const T& a, const T& b) { return a.le(b); }, py::is_operator(), Release());
  c.def("__le__", [](const T& a, Scalar b) { return a.le(b); }, py::is_operator(), Release());
  c.def("__gt__", [](const T& a, const T& b) { return a.gt(b); }, py::is_operator(), Release());
  c.def("__gt__", [](const T& a, Scalar b) { return a.gt(b); }, py::is_operator(), Release());
  c.def("__ge__", [](const T& a, const T& b) { return a.ge(b); }, py::is_operator(), Release());
  c.def("__ge__", [](const T& a, Scalar b) { return a.ge(b); }, py::is_operator(), Release());
  // Tensors hash by identity, as torch's do, although == is elementwise.
  c.def("__hash__", [](const py::object& self) { return reinterpret_cast<intptr_t>(self.ptr()) >> 4; });
  // After every tensor and number form, so those keep pybind11's first match.
  bind_local_array_operands(c);
}

}  // namespace thd::python
