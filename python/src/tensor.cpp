// thd.Tensor: a local tensor in this process's memory, and its exchange with NumPy.
#include <cstring>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <thd/distributed.h>

#include "bindings.h"

namespace thd::python {

namespace {

// NumPy's name for each dtype (thd's own names are NumPy's); nullptr where NumPy
// has none.
const char* numpy_name(DType d) { return d == DType::BFloat16 ? nullptr : dtype_name(d).data(); }

DType dtype_from_numpy(const py::dtype& dt) {
  const std::string name = py::str(dt.attr("name"));
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto d = static_cast<DType>(i);
    const char* n = numpy_name(d);
    if (n != nullptr && name == n) return d;
  }
  throw TypeError("from_numpy: NumPy dtype " + name +
                      " has no thd dtype (thd has bool, uint8, int8, int32, int64, float16, float32, float64)",
                  ErrorContext{.op = "from_numpy"});
}

// The caller (thd.from_numpy) passes a C-contiguous array in native byte order.
Tensor from_numpy(const py::array& a) {
  const DType dtype = dtype_from_numpy(a.dtype());
  Shape shape(a.shape(), a.shape() + a.ndim());
  Tensor t = Tensor::empty(shape, dtype);
  if (t.nbytes() != static_cast<size_t>(a.nbytes())) {
    throw ValueError("from_numpy: the array is not C-contiguous", ErrorContext{.op = "from_numpy"});
  }
  if (t.nbytes() > 0) std::memcpy(t.data_ptr(), a.data(), t.nbytes());
  return t;
}

}  // namespace

py::object tensor_to_numpy(const Tensor& t) {
  const char* name = numpy_name(t.dtype());
  if (name == nullptr) {
    throw TypeError("numpy: NumPy has no " + std::string(dtype_name(t.dtype())) +
                        "; convert first with .to(thd.float32)",
                    ErrorContext{.op = "numpy"});
  }
  const Tensor c = t.cpu().contiguous();
  py::array a(py::dtype(name), std::vector<py::ssize_t>(c.shape().begin(), c.shape().end()));
  if (c.nbytes() > 0) std::memcpy(a.mutable_data(), c.data_ptr(), c.nbytes());
  return a;
}

py::object tensor_to_list(const Tensor& t) {
  const Tensor c = t.dtype() == kBFloat16 ? t.to(kFloat32) : t;
  return tensor_to_numpy(c).attr("tolist")();
}

void bind_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor", R"doc(A dense tensor in this process's memory (C++ thd::Tensor).

Made with thd.from_numpy() or returned by DistributedTensor.get(); .numpy() and
.tolist() copy its values out, .dist_send() uploads it to a worker node.)doc");
  cls.def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); },
                            "The sizes of its dims, a tuple of ints.");
  cls.def_property_readonly("dtype", &Tensor::dtype, "Its element type (thd.float32, ...).");
  cls.def("dim", &Tensor::dim, "The number of dims.");
  cls.def("numel", &Tensor::numel, "The number of elements.");
  cls.def("size", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); }, "The shape, a tuple of ints.");
  cls.def("size", &Tensor::size, py::arg("dim"), "The size of dim `dim` (negative counts from the end).");
  cls.def("__len__", [](const Tensor& t) {
    if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
    return t.size(0);
  });
  cls.def("numpy", &tensor_to_numpy, "A new NumPy array holding a copy of the values.");
  cls.def("tolist", &tensor_to_list, "The values as a nested list (a number for a 0-dim tensor).");
  cls.def("item", [](const Tensor& t) { return t.item(); },
          "The value of a one-element tensor, as a Python bool, int or float.");
  cls.def("to", [](const Tensor& t, DType dtype) { return t.to(dtype); }, py::arg("dtype"),
          "A copy converted to `dtype` (the tensor itself when it already has it).");
  cls.def("view", [](const Tensor& t, const py::args& shape) { return t.view(shape_from_args(shape, "view")); },
          "A view with another shape of the same number of elements (one size may be -1); "
          "thd.ShapeError when the strides do not allow it.");
  cls.def("reshape",
          [](const Tensor& t, const py::args& shape) { return t.reshape(shape_from_args(shape, "reshape")); },
          "As view(), copying when the strides do not allow a view.");
  cls.def("clone", &Tensor::clone, "A contiguous copy.");
  cls.def("dist_send", &Tensor::dist_send, py::arg("node") = py::none(),
          py::call_guard<py::gil_scoped_release>(),
          "Uploads a copy to worker `node` (default: the current node, see thd.node) and returns the "
          "thd.DistributedTensor there. Master only.");
  cls.def("__repr__", &Tensor::str);
  cls.def("__bool__", [](const Tensor& t) {
    if (t.numel() != 1) {
      throw ValueError("bool: the truth value of a tensor of " + std::to_string(t.numel()) +
                           " elements is ambiguous; use .tolist() or .numpy()",
                       ErrorContext{.op = "bool"});
    }
    return t.item().to_bool();
  });

  m.def("_from_numpy", &from_numpy, py::arg("array"));
}

}  // namespace thd::python
