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

// The caller (thd.from_numpy) passes a writeable array in native byte order whose
// strides are whole, non-negative numbers of elements: the tensor shares its memory
// and keeps it alive (torch.from_numpy's contract).
Tensor from_numpy(const py::array& a) {
  const DType dtype = dtype_from_numpy(a.dtype());
  const Shape shape(a.shape(), a.shape() + a.ndim());
  if (a.size() == 0) return Tensor::empty(shape, dtype);
  Shape strides;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    if (a.strides(i) < 0 || a.strides(i) % a.itemsize() != 0) {
      throw ValueError("from_numpy: strides that are not whole elements", ErrorContext{.op = "from_numpy"});
    }
    strides.push_back(a.strides(i) / a.itemsize());
  }
  // The array stays alive as long as the tensor's memory does; the last tensor may go
  // on any thread, so the release takes the GIL (and is skipped once the interpreter
  // is gone, when nothing is left to release).
  auto* owner = new py::object(a);
  auto release = [owner](void*) {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    delete owner;
  };
  return Tensor::from_blob(const_cast<void*>(a.data()), shape, dtype, strides, release);
}

const char* buffer_format(DType d) {
  switch (d) {
    case DType::Bool: return "?";
    case DType::UInt8: return "B";
    case DType::Int8: return "b";
    case DType::Int32: return "i";
    case DType::Int64: return "q";
    case DType::Float16: return "e";
    case DType::BFloat16: return "H";  // Python and NumPy have no bfloat16: its 16-bit patterns
    case DType::Float32: return "f";
    case DType::Float64: return "d";
  }
  return "B";
}

std::vector<py::ssize_t> byte_strides(const Tensor& t) {
  std::vector<py::ssize_t> out;
  for (int64_t s : t.strides()) out.push_back(static_cast<py::ssize_t>(s * static_cast<int64_t>(t.element_size())));
  return out;
}

}  // namespace

py::object tensor_to_numpy(const Tensor& t) {
  const char* name = numpy_name(t.dtype());
  if (name == nullptr) {
    throw TypeError("numpy: NumPy has no " + std::string(dtype_name(t.dtype())) +
                        "; convert first with .to(thd.float32)",
                    ErrorContext{.op = "numpy"});
  }
  // A view of the tensor's memory (a GPU tensor's copy on the host), which the array
  // keeps alive: no copy, as torch's Tensor.numpy().
  const Tensor c = t.cpu();
  const std::vector<py::ssize_t> shape(c.shape().begin(), c.shape().end());
  return py::array(py::dtype(name), shape, byte_strides(c), c.data_ptr(), py::cast(c));
}

py::object tensor_to_list(const Tensor& t) {
  const Tensor c = t.dtype() == kBFloat16 ? t.to(kFloat32) : t;
  return tensor_to_numpy(c).attr("tolist")();
}

void bind_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor", py::buffer_protocol(),
                         R"doc(A dense tensor in this process's memory (C++ thd::Tensor).

Made with thd.from_numpy() (which shares the array's memory) or returned by
DistributedTensor.get(). .numpy(), numpy.asarray() and memoryview() view its memory
without a copy; .tolist() copies its values out; .dist_send() uploads it to a worker
node.)doc");
  // pybind11 gives a buffer callback no way to fail (an exception there terminates),
  // so every tensor has one: local tensors from Python are on the CPU, and a
  // bfloat16 one shows its 16-bit patterns.
  cls.def_buffer([](const Tensor& t) {
    const std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
    return py::buffer_info(t.data_ptr(), static_cast<py::ssize_t>(t.element_size()), buffer_format(t.dtype()),
                           static_cast<py::ssize_t>(t.dim()), shape, byte_strides(t));
  });
  cls.def(
      "__array__",
      [](const Tensor& t, const py::object& dtype, const py::object& copy) {
        py::object a = tensor_to_numpy(t);
        if (!dtype.is_none()) a = a.attr("astype")(dtype, py::arg("copy") = false);
        if (!copy.is_none() && copy.cast<bool>()) a = a.attr("copy")();
        return a;
      },
      py::arg("dtype") = py::none(), py::arg("copy") = py::none(),
      "numpy.asarray(t): a view of its memory (a copy when asked for another dtype or copy=True).");
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
  cls.def("numpy", &tensor_to_numpy,
          "A NumPy array that views the tensor's memory (no copy; writes show in both), as torch's.");
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
