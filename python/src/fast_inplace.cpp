// x.add_(1.0) and its kin without pybind11's call machinery. A training loop's
// in-place arithmetic with a number is the most frequent call of the package, and
// through pybind11 a third of its cost was the binding's: the overload dispatcher,
// its argument loaders, and a bound-method object made for every call (pybind11's
// methods are not method descriptors, so Python cannot call them unbound). Here
// add_, sub_, mul_ and div_ are CPython method descriptors (METH_FASTCALL): one
// positional Python bool, int or float goes straight to the C++ op; any other call
// (a tensor, a NumPy integer, a keyword) goes to the general pybind11 binding, kept as
// the class attribute _<name>general, which raises the errors.
#include <array>
#include <string>
#include <tuple>
#include <vector>

#include <Python.h>

#include "bindings.h"

namespace thd::python {

namespace {

using DT = DistributedTensor;
using Op = DT& (DT::*)(Scalar);

// What pybind11's dispatcher does with an exception: a pending Python error as it
// is, anything else through the registered translators (thd's errors first).
PyObject* raise_current_exception() {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (...) {
    if (!py::detail::apply_exception_translators(py::detail::get_local_internals().registered_exception_translators) &&
        !py::detail::apply_exception_translators(py::detail::get_internals().registered_exception_translators)) {
      PyErr_SetString(PyExc_SystemError, "thd: an exception escaped the exception translators");
    }
  }
  return nullptr;
}

// A Python bool, int (that fits int64) or float, read by the Scalar caster without
// conversions: what the general binding would take first, with no tensor to try.
bool plain_number(PyObject* o, Scalar& out) {
  py::detail::make_caster<Scalar> number;
  if (!number.load(o, /*convert=*/false)) return false;
  out = py::detail::cast_op<Scalar>(number);
  return true;
}

struct FastOp {
  Op op;
  PyObject* general;  // the pybind11 function, called with self first
  PyMethodDef def;
};

// Index I of kOps: one function per op, as a METH_FASTCALL method needs.
template <size_t I>
PyObject* call(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);

std::array<FastOp, 4> g_ops = {{
    {&DT::add_, nullptr, {"add_", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&call<0>)),
                          METH_FASTCALL | METH_KEYWORDS, nullptr}},
    {&DT::sub_, nullptr, {"sub_", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&call<1>)),
                          METH_FASTCALL | METH_KEYWORDS, nullptr}},
    {&DT::mul_, nullptr, {"mul_", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&call<2>)),
                          METH_FASTCALL | METH_KEYWORDS, nullptr}},
    {&DT::div_, nullptr, {"div_", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&call<3>)),
                          METH_FASTCALL | METH_KEYWORDS, nullptr}},
}};

template <size_t I>
PyObject* call(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const FastOp& f = g_ops[I];
  Scalar value;
  if (nargs == 1 && kwnames == nullptr && plain_number(args[0], value)) {
    try {
      DT& t = py::handle(self).cast<DT&>();
      {
        py::gil_scoped_release release;  // the op may wait under flow control
        (t.*f.op)(value);
      }
      Py_INCREF(self);
      return self;
    } catch (...) {
      return raise_current_exception();
    }
  }
  // The general binding, with self in front of the arguments.
  const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  std::vector<PyObject*> all(static_cast<size_t>(nargs + nkw + 1));
  all[0] = self;
  for (Py_ssize_t i = 0; i < nargs + nkw; ++i) all[static_cast<size_t>(i + 1)] = args[i];
  return PyObject_Vectorcall(f.general, all.data(), static_cast<size_t>(nargs + 1), kwnames);
}

}  // namespace

void bind_fast_inplace(py::module_& m) {
  py::object cls = m.attr("DistributedTensor");
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  for (FastOp& f : g_ops) {
    // pybind11 stores methods as instancemethod objects around its function.
    py::object bound = py::reinterpret_borrow<py::object>(PyDict_GetItemString(type->tp_dict, f.def.ml_name));
    if (!bound || !PyInstanceMethod_Check(bound.ptr())) {
      throw std::runtime_error(std::string("thd: DistributedTensor.") + f.def.ml_name + " is not bound");
    }
    py::object general = py::reinterpret_borrow<py::object>(PyInstanceMethod_GET_FUNCTION(bound.ptr()));
    f.general = general.inc_ref().ptr();  // lives as long as the module: never freed
    static std::array<std::string, std::tuple_size_v<decltype(g_ops)>> docs;
    std::string& doc = docs[static_cast<size_t>(&f - g_ops.data())];
    doc = py::str(general.attr("__doc__")).cast<std::string>();
    f.def.ml_doc = doc.c_str();
    cls.attr(("_" + std::string(f.def.ml_name) + "general").c_str()) = bound;
    py::object descr = py::reinterpret_steal<py::object>(PyDescr_NewMethod(type, &f.def));
    if (!descr) throw py::error_already_set();
    cls.attr(f.def.ml_name) = descr;
  }
}

}  // namespace thd::python
