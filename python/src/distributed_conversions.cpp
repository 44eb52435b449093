// DistributedTensor's conversions as torch.Tensor's: the dtype shorthands (x.float(),
// x.long(), ...), the transposes .T and .mT, a one-element tensor as a Python number
// (float(x), int(x), operator.index(x)), and NumPy and DLPack. NumPy gets the
// downloaded values through __array__ and is told not to run its ufuncs on the
// tensor (__array_ufunc__ = None): otherwise `array + x` iterates x with __len__ and
// __getitem__ into an object array of 0-d tensors. DLPack is refused with the fix,
// since the bytes are on a worker, not in this process.
#include <numeric>
#include <string>

#include "bindings.h"

namespace thd::python {

namespace {

using DT = DistributedTensor;

void bind_dtype_shorthands(py::class_<DT>& c) {
  struct Shorthand {
    const char* name;
    DType dtype;
  };
  // torch's short() (int16) has no thd dtype.
  static constexpr Shorthand kShorthands[] = {
      {"bool", kBool},         {"byte", kUInt8},   {"char", kInt8},     {"int", kInt32},     {"long", kInt64},
      {"half", DType::Float16}, {"bfloat16", DType::BFloat16}, {"float", kFloat32}, {"double", DType::Float64},
  };
  for (const Shorthand& s : kShorthands) {
    const DType dtype = s.dtype;
    c.def(s.name, [dtype](const DT& t) { return t.to(dtype); }, Release(),
          ("self.to(thd." + std::string(dtype_name(dtype)) + "): a converted copy (self when it already has that "
           "dtype).").c_str());
  }
}

// The value of a one-element tensor (a sync point), as torch's float(x) and int(x).
Scalar one_element(const DT& t, const char* op) {
  if (t.numel() != 1) {
    throw ValueError("only a one-element tensor converts to a Python number; this one has " +
                         std::to_string(t.numel()) + " elements",
                     ErrorContext{.op = op, .node = t.node()});
  }
  py::gil_scoped_release release;
  return t.item();
}

void bind_numbers(py::class_<DT>& c) {
  c.def("__float__", [](const DT& t) { return one_element(t, "float").to_double(); },
        "float(x) of a one-element tensor (waits for it).");
  // Python's int() of the value: a float truncates toward zero; NaN and inf raise.
  c.def("__int__", [](const DT& t) {
    py::object value = py::reinterpret_steal<py::object>(PyNumber_Long(py::cast(one_element(t, "int")).ptr()));
    if (!value) throw py::error_already_set();
    return value;
  }, "int(x) of a one-element tensor (waits for it; a float truncates toward zero).");
  c.def("__index__", [](const DT& t) {
    if (!is_integral(t.dtype(), /*include_bool=*/true)) {
      throw TypeError("only an integral tensor of one element is an index; this one is " +
                          std::string(dtype_name(t.dtype())),
                      ErrorContext{.op = "index", .node = t.node()});
    }
    return one_element(t, "index").to_int64();
  }, "The value of a one-element integral tensor as an index (lst[x], range(x)); waits for it.");
}

void bind_transposes(py::class_<DT>& c) {
  c.def_property_readonly("T", [](const DT& t) {
    Dims reversed(static_cast<size_t>(t.dim()));
    std::iota(reversed.rbegin(), reversed.rend(), int64_t{0});
    return t.permute(reversed);
  }, "The tensor with its dims reversed (a view): the transpose of a matrix, itself for 0 or 1 dims.");
  c.def_property_readonly("mT", [](const DT& t) {
    if (t.dim() < 2) {
      throw ShapeError("a matrix or a batch of matrices is needed, got a tensor of " + std::to_string(t.dim()) +
                           " dims",
                       ErrorContext{.op = "mT", .node = t.node()});
    }
    return t.transpose(-2, -1);
  }, "The transpose of the last two dims (a view), as transpose(-2, -1).");
}

void bind_numpy_and_dlpack(py::class_<DT>& c) {
  c.attr("__array_ufunc__") = py::none();
  c.def("__array__", [](const DT& t, const py::object& dtype, const py::object& /*copy*/) {
    Tensor local;
    {
      py::gil_scoped_release release;
      local = t.get();
    }
    py::object array = tensor_to_numpy(local);  // always a new array, so copy= is met either way
    if (dtype.is_none()) return array;
    return array.attr("astype")(dtype, py::arg("copy") = false);
  }, py::arg("dtype") = py::none(), py::arg("copy") = py::none(),
        "np.asarray(x): waits for the tensor and returns a new NumPy array of its values (as x.numpy()).");
  const auto refuse = [](const DT& t, const char* op) {
    throw TypeError("the tensor lives on worker node " + std::to_string(t.node()) +
                        ", not in this process, so DLPack cannot share it; download it first: x.get() (a local "
                        "thd.Tensor, which has __dlpack__) or x.numpy()",
                    ErrorContext{.op = op, .node = t.node()});
  };
  c.def("__dlpack__", [refuse](const DT& t, const py::object& /*stream*/) { refuse(t, "__dlpack__"); },
        py::arg("stream") = py::none(), "Refused with thd.TypeError: the bytes are on a worker; use x.get() first.");
  c.def("__dlpack_device__", [refuse](const DT& t) { refuse(t, "__dlpack_device__"); },
        "Refused with thd.TypeError, as __dlpack__.");
}

}  // namespace

void bind_distributed_conversions(py::module_& m) {
  auto c = py::reinterpret_borrow<py::class_<DT>>(m.attr("DistributedTensor"));
  bind_dtype_shorthands(c);
  bind_numbers(c);
  bind_transposes(c);
  bind_numpy_and_dlpack(c);
}

}  // namespace thd::python
