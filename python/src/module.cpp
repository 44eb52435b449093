// thd._C: the extension module under the Python package thd (python/thd). The
// package's __init__.py imports it and adds the pure-Python layer: argument
// normalization (shapes, dtypes, timeouts), docstrings of the public functions.
#include <string>

#include <thd/config.h>

#include "bindings.h"

namespace thd::python {

namespace {

int64_t index_of(py::handle h) {
  return py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr())).cast<int64_t>();
}

}  // namespace

Shape shape_from_args(const py::args& args, const char* op) {
  // One sequence argument is the whole shape: t.view((2, 3)) as t.view(2, 3).
  if (args.size() == 1 && !PyIndex_Check(args[0].ptr()) && py::isinstance<py::sequence>(args[0])) {
    return args[0].cast<Shape>();
  }
  Shape shape;
  shape.reserve(args.size());
  for (const py::handle a : args) {
    if (!PyIndex_Check(a.ptr())) {
      throw TypeError(std::string(op) + ": a shape is ints or one sequence of ints, got " +
                          std::string(py::str(py::type::of(a).attr("__name__"))),
                      ErrorContext{.op = op});
    }
    shape.push_back(index_of(a));
  }
  return shape;
}

std::vector<int64_t> dims_from_object(const py::object& dim, const char* op) {
  if (dim.is_none()) return {};
  if (PyIndex_Check(dim.ptr())) return {index_of(dim)};
  if (py::isinstance<py::sequence>(dim)) return dim.cast<std::vector<int64_t>>();
  throw TypeError(std::string(op) + ": dim is None, an int or a sequence of ints, got " +
                      std::string(py::str(py::type::of(dim).attr("__name__"))),
                  ErrorContext{.op = op});
}

void bind_dtypes(py::module_& m) {
  py::enum_<DType> dtype(m, "dtype", "The element type of a tensor (thd.float32, thd.int64, ...).");
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto d = static_cast<DType>(i);
    dtype.value(std::string(dtype_name(d)).c_str(), d);
  }
  // Assigned, not def()'d: def() would add an overload behind the enum's own.
  const auto qualified = [](DType d) { return "thd." + std::string(dtype_name(d)); };
  dtype.attr("__repr__") = py::cpp_function(qualified, py::name("__repr__"), py::is_method(dtype));
  dtype.attr("__str__") = py::cpp_function(qualified, py::name("__str__"), py::is_method(dtype));
  dtype.def_property_readonly("name", [](DType d) { return std::string(dtype_name(d)); },
                              "Its name: \"float32\", \"int64\", ...");
  dtype.def_property_readonly("itemsize", [](DType d) { return element_size(d); }, "Bytes per element.");
  dtype.def_property_readonly("is_floating_point", [](DType d) { return is_floating_point(d); },
                              "True for float16, bfloat16, float32 and float64.");
  m.def("promote_types", &promote_types, py::arg("a"), py::arg("b"),
        "The dtype both operands of a binary op are computed in (torch.promote_types).");
}

}  // namespace thd::python

PYBIND11_MODULE(_C, m) {
  m.doc() = "The compiled core of the thd package; use `import thd`, not this module.";
  m.attr("__version__") = THD_VERSION_STRING;
  m.attr("with_cuda") = static_cast<bool>(THD_WITH_CUDA);
  thd::python::bind_errors(m);
  thd::python::bind_dtypes(m);
  thd::python::bind_tensor(m);
  thd::python::bind_tensor_ops(m);
  thd::python::bind_dlpack(m);
  thd::python::bind_distributed(m);
  thd::python::bind_distributed_ops(m);
  thd::python::bind_distributed_conversions(m);
  thd::python::bind_devices(m);
  thd::python::bind_fast_inplace(m);
  thd::python::bind_collectives(m);
  thd::python::bind_streams(m);
  thd::python::bind_graphs(m);
  thd::python::bind_interrupts(m);
  thd::python::bind_process_group(m);
}
