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

// Whether `h` is data held in this process that no op of a DistributedTensor takes
// as it is: a thd.Tensor, a NumPy array, a torch tensor (anything with __array__ or
// __dlpack__), a list or a tuple. Numbers, NumPy scalars and 0-d arrays are not:
// the Scalar caster reads them first.
bool is_local_array(py::handle h);

// Raises thd.TypeError for `a <symbol> other` (reflected: `other <symbol> a`) with a
// local array `other`, naming the fix: upload it to a's node, as torch refuses to
// mix devices. foreign_operand.cpp.
[[noreturn]] void refuse_local_operand(const DistributedTensor& a, py::handle other, const char* symbol,
                                       bool reflected);

// A method's operand that is neither a tensor nor a number: thd.TypeError, naming
// the upload for a local array.
[[noreturn]] void refuse_operand(const DistributedTensor& a, py::handle other, const char* method);

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

// `a OP b` and its Python operator (`symbol` is OP as written): thd.TypeError for a
// local array (NumPy would otherwise take over and iterate the tensor), and
// NotImplemented for any other operand that is neither a tensor nor a number, so
// Python tries the other side and then raises its usual TypeError.
template <typename F>
void bind_binary_operator(py::class_<DistributedTensor>& c, const char* name, const char* symbol, F op) {
  c.def(
      name,
      [op, symbol](const DistributedTensor& a, py::handle b) -> py::object {
        DistributedTensor out;
        const bool ok = with_operand(
            b, out, [&](const DistributedTensor& t) { return op(a, t); }, [&](Scalar s) { return op(a, s); });
        if (!ok) {
          if (is_local_array(b)) refuse_local_operand(a, b, symbol, /*reflected=*/false);
          return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        }
        return py::cast(std::move(out));
      },
      py::is_operator());
}

// The reflected `b OP a` (__radd__, ...), called when b is not a DistributedTensor:
// op(Scalar, a) for a number, thd.TypeError for a local array, else NotImplemented.
template <typename F>
void bind_reflected_operator(py::class_<DistributedTensor>& c, const char* name, const char* symbol, F op) {
  c.def(
      name,
      [op, symbol](const DistributedTensor& a, py::handle b) -> py::object {
        DistributedTensor out;
        const bool ok = with_operand(
            b, out, [&](const DistributedTensor& t) { return op(t, a); }, [&](Scalar s) { return op(s, a); });
        if (!ok) {
          if (is_local_array(b)) refuse_local_operand(a, b, symbol, /*reflected=*/true);
          return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        }
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
    // `a += b` falls back to `a + b`, which refuses a local array by name.
    if (is_operator) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    refuse_operand(a, other, name);
  };
  if (is_operator) {
    c.def(name, f, py::is_operator());
  } else {
    c.def(name, f, py::arg("other"), doc);
  }
}

}  // namespace thd::python
