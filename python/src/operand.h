// DistributedTensor's arithmetic with a tensor-or-number operand, bound as one
// function per op instead of one pybind11 overload per operand kind. pybind11 tries
// overloads in order, and the tensor overload, given a number, fails only after a
// lookup of a module-local type that raises and clears an AttributeError: a third of
// the cost of `x.add_(1.0)`. Here the operand's type is checked directly: a tensor
// first (so a tensor is never read as a number), then a Python number, then anything
// with __index__ or __float__ (NumPy scalars). In-place ops return the very object
// they were called on, as torch's do, rather than a new Python object per call.
#pragma once

#include <string>
#include <utility>

#include <Python.h>

#include "bindings.h"

namespace thd::python {

// `h` as a DistributedTensor (nullptr when it is none): an exact type check, the
// common case, before the subclass check.
inline const DistributedTensor* as_distributed(py::handle h) {
  static PyTypeObject* const type = reinterpret_cast<PyTypeObject*>(py::type::of<DistributedTensor>().ptr());
  if (Py_TYPE(h.ptr()) != type && !PyType_IsSubtype(Py_TYPE(h.ptr()), type)) return nullptr;
  return &h.cast<const DistributedTensor&>();
}

// Calls on_tensor(const DistributedTensor&) or on_scalar(Scalar) with the GIL
// released (either may wait under flow control); false when `other` is neither.
template <typename R, typename OnTensor, typename OnScalar>
bool with_operand(py::handle other, R& out, OnTensor&& on_tensor, OnScalar&& on_scalar) {
  if (const DistributedTensor* t = as_distributed(other)) {
    py::gil_scoped_release release;
    out = on_tensor(*t);
    return true;
  }
  py::detail::make_caster<Scalar> number;
  if (number.load(other, /*convert=*/false) || number.load(other, /*convert=*/true)) {
    const Scalar s = py::detail::cast_op<Scalar>(number);
    py::gil_scoped_release release;
    out = on_scalar(s);
    return true;
  }
  return false;
}

// `a OP b` and its Python operator: NotImplemented for an operand that is neither a
// tensor nor a number, so Python raises its usual TypeError (or tries the other side).
template <typename F>
void bind_binary_operator(py::class_<DistributedTensor>& c, const char* name, F op) {
  c.def(
      name,
      [op](const DistributedTensor& a, py::handle b) -> py::object {
        DistributedTensor out;
        const bool ok = with_operand(
            b, out, [&](const DistributedTensor& t) { return op(a, t); }, [&](Scalar s) { return op(a, s); });
        if (!ok) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        return py::cast(std::move(out));
      },
      py::is_operator());
}

// In place, `a OP= b` (is_operator: NotImplemented for a foreign operand) or a method
// such as add_ (a thd.TypeError naming the op and the operand's type); returns self.
template <typename F>
void bind_inplace(py::class_<DistributedTensor>& c, const char* name, F op, bool is_operator, const char* doc = "") {
  auto f = [op, name, is_operator](py::object self, py::handle other) -> py::object {
    DistributedTensor& a = self.cast<DistributedTensor&>();
    int done = 0;
    const bool ok = with_operand(
        other, done, [&](const DistributedTensor& t) { return (op(a, t), 1); }, [&](Scalar s) { return (op(a, s), 1); });
    if (ok) return self;
    if (is_operator) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    throw TypeError(std::string("DistributedTensor.") + name + ": other must be a DistributedTensor or a number, got " +
                        std::string(py::str(py::type::of(other).attr("__name__"))),
                    ErrorContext{.op = name});
  };
  if (is_operator) {
    c.def(name, f, py::is_operator());
  } else {
    c.def(name, f, py::arg("other"), doc);
  }
}

}  // namespace thd::python
