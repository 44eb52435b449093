// thd.Tensor's arithmetic, matmul and comparisons: Python's operators over the C++
// local tensor's ops (include/thd/tensor.h), computed in this process with torch's
// broadcasting and type promotion. The tensor forms come before the number forms,
// so a tensor operand is never read as a number.
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
}

}  // namespace thd::python
