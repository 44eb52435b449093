// What the binding files of thd._C share: each area registers itself with one
// bind_* function (module.cpp calls them in order), and thd::Scalar converts from
// and to Python numbers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>
// Every file sees the same conversions: std::vector and std::optional as Python
// sequences and None (one file without stl.h would bind them differently).
#include <pybind11/stl.h>

#include <thd/distributed.h>
#include <thd/scalar.h>
#include <thd/tensor.h>

namespace thd::python {

namespace py = pybind11;
// Releases the GIL for the whole call: for bindings that can wait for a worker.
using Release = py::call_guard<py::gil_scoped_release>;

void bind_errors(py::module_& m);
void bind_dtypes(py::module_& m);
void bind_tensor(py::module_& m);
void bind_distributed(py::module_& m);
void bind_collectives(py::module_& m);
void bind_streams(py::module_& m);
// thd.Graph and `with thd.graph()` (graphs.cpp).
void bind_graphs(py::module_& m);
void bind_interrupts(py::module_& m);
void bind_devices(py::module_& m);
// add_, sub_, mul_, div_ of a number without pybind11 in the way (fast_inplace.cpp), after bind_distributed_ops.
void bind_fast_inplace(py::module_& m);
// Process-group (SPMD) mode, process_group.cpp.
void bind_process_group(py::module_& m);
// thd.Tensor's operators (tensor_ops.cpp) and DLPack (dlpack.cpp), onto the class bind_tensor made.
void bind_tensor_ops(py::module_& m);
void bind_dlpack(py::module_& m);

// A shape given as separate ints (t.view(2, 3)) or as one sequence (t.view((2, 3))).
Shape shape_from_args(const py::args& args, const char* op);
// dim=None (every dim), an int, or a sequence of ints.
std::vector<int64_t> dims_from_object(const py::object& dim, const char* op);

// A reduction of a distributed tensor, torch's way: over every element (a 0-dim
// tensor) when dim is None and keepdim is false, else over the dims given.
template <DistributedTensor (DistributedTensor::*All)() const,
          DistributedTensor (DistributedTensor::*Over)(const Dims&, bool) const>
DistributedTensor reduce(const DistributedTensor& t, const py::object& dim, bool keepdim, const char* op) {
  const bool all = dim.is_none() && !keepdim;
  const Dims dims = dims_from_object(dim, op);
  py::gil_scoped_release release;
  return all ? (t.*All)() : (t.*Over)(dims, keepdim);
}

// Makes a tensor on `node` when given, else on the current node (thd.node scope).
template <typename F>
DistributedTensor on_node(std::optional<int> node, F&& make) {
  std::optional<NodeScope> scope;
  if (node) scope.emplace(*node);
  return make();
}

// A C++ RAII scope (NodeScope, StreamScope) as a Python context manager: the scope
// lives from __enter__ to __exit__; `with` it again while entered is a ValueError.
template <typename Scope, typename Arg>
class PyScope {
 public:
  PyScope(Arg arg, const char* name) : arg_(std::move(arg)), name_(name) {}
  const Arg& arg() const { return arg_; }
  void enter() {
    if (scope_) throw ValueError(std::string(name_) + ": this scope is already entered", ErrorContext{.op = name_});
    scope_ = std::make_unique<Scope>(arg_);
  }
  void exit() { scope_.reset(); }

  // Binds __enter__ and __exit__ on its Python class.
  template <typename Class>
  static void bind_context(Class& c) {
    c.def("__enter__", [](PyScope& s) -> PyScope& { s.enter(); return s; }, py::return_value_policy::reference);
    c.def("__exit__", [](PyScope& s, const py::args&) { s.exit(); return false; });
  }

 private:
  Arg arg_;
  const char* name_;
  std::unique_ptr<Scope> scope_;
};

// More of DistributedTensor's ops (distributed_ops.cpp), onto the class bind_distributed made.
void bind_distributed_ops(py::module_& m);
// DistributedTensor's dtype shorthands, .T/.mT, float()/int(), NumPy and DLPack (distributed_conversions.cpp).
void bind_distributed_conversions(py::module_& m);

}  // namespace thd::python

namespace pybind11::detail {

// Python bool, int and float (and NumPy scalars, through __index__ and __float__)
// become a thd::Scalar of the same kind, which decides type promotion as in torch:
// an int tensor times 2 stays int, times 2.5 becomes float32.
template <>
struct type_caster<thd::Scalar> {
  PYBIND11_TYPE_CASTER(thd::Scalar, const_name("int | float | bool"));

  bool load(handle src, bool convert) {
    if (!src) return false;
    PyObject* o = src.ptr();
    if (PyBool_Check(o)) {
      value = thd::Scalar(o == Py_True);
      return true;
    }
    if (PyLong_Check(o)) {
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
      if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return false;
      }
      value = thd::Scalar(static_cast<int64_t>(v));
      return true;
    }
    if (PyFloat_Check(o)) {
      value = thd::Scalar(PyFloat_AsDouble(o));
      return true;
    }
    if (!convert) return false;
    // A thd tensor is never read as a number: a one-element one has __index__ and
    // __float__ (as torch's), but an op given a tensor means the tensor.
    if (pybind11::isinstance<thd::DistributedTensor>(src) || pybind11::isinstance<thd::Tensor>(src)) return false;
    // NumPy scalars and 0-d arrays (and torch's 0-d tensors), as torch takes them:
    // an array of one or more dims is not a number, even of one element.
    if (PyObject_HasAttrString(o, "ndim")) {
      object ndim = reinterpret_steal<object>(PyObject_GetAttrString(o, "ndim"));
      if (!ndim || !PyLong_Check(ndim.ptr()) || PyLong_AsLong(ndim.ptr()) != 0) {
        PyErr_Clear();
        return false;
      }
      // NumPy's bool refuses __index__ and would read as a float.
      if (object dtype = reinterpret_steal<object>(PyObject_GetAttrString(o, "dtype")); dtype) {
        if (object kind = reinterpret_steal<object>(PyObject_GetAttrString(dtype.ptr(), "kind")); kind) {
          if (PyUnicode_Check(kind.ptr()) && PyUnicode_CompareWithASCIIString(kind.ptr(), "b") == 0) {
            const int truth = PyObject_IsTrue(o);
            if (truth < 0) {
              PyErr_Clear();
              return false;
            }
            value = thd::Scalar(truth == 1);
            return true;
          }
        }
      }
      PyErr_Clear();
    }
    // Integers have __index__, floats __float__ (a float 0-d array also has an
    // __index__, which refuses).
    if (PyIndex_Check(o)) {
      object i = reinterpret_steal<object>(PyNumber_Index(o));
      if (i) return load(i, false);
      PyErr_Clear();
    }
    if (PyObject_HasAttrString(o, "__float__")) {
      const double d = PyFloat_AsDouble(o);
      if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return false;
      }
      value = thd::Scalar(d);
      return true;
    }
    return false;
  }

  static handle cast(const thd::Scalar& s, return_value_policy, handle) {
    if (s.is_bool()) return pybind11::bool_(s.to_bool()).release();
    if (s.is_integral()) return PyLong_FromLongLong(s.to_int64());
    return PyFloat_FromDouble(s.to_double());
  }
};

}  // namespace pybind11::detail

namespace thd::python {

// A new NumPy array holding a copy of `t` (any strides); thd.TypeError for
// bfloat16, which NumPy lacks.
pybind11::object tensor_to_numpy(const Tensor& t);
// A Python list (nested per dim) or, for a 0-dim tensor, a number.
pybind11::object tensor_to_list(const Tensor& t);

}  // namespace thd::python
