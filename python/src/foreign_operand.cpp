// The errors for an operand of a DistributedTensor op that lives in this process (a
// NumPy array, a torch tensor, a thd.Tensor, a list). Without them Python would let
// NumPy take over `x + array` and iterate the tensor into an object array of 0-d
// tensors; torch refuses to mix devices the same way, naming the fix.
#include <string>

#include "operand.h"

namespace thd::python {

namespace {

// "numpy.ndarray", "torch.Tensor", "thd.Tensor", "list".
std::string qualified_type_name(py::handle h) {
  const py::handle type = py::type::of(h);
  std::string module = py::str(type.attr("__module__"));
  const std::string name = py::str(type.attr("__qualname__"));
  if (module == "builtins") return name;
  if (module.rfind("thd.", 0) == 0) module = "thd";
  return module + "." + name;
}

// `subject` is a local array: where it is, and the fix.
std::string upload_hint(const std::string& subject, const DistributedTensor& a) {
  return subject + " is a local array (in this process; the tensor lives on worker node " +
         std::to_string(a.node()) + "); upload it with thd.DistributedTensor.from_(other, node=" +
         std::to_string(a.node()) + ") (or use a number)";
}

}  // namespace

bool is_local_array(py::handle h) {
  return py::isinstance<Tensor>(h) || PyList_Check(h.ptr()) || PyTuple_Check(h.ptr()) ||
         py::hasattr(h, "__array__") || py::hasattr(h, "__dlpack__") || py::hasattr(h, "__array_interface__");
}

void refuse_local_operand(const DistributedTensor& a, py::handle other, const char* symbol, bool reflected) {
  const std::string other_name = qualified_type_name(other);
  const std::string expr = reflected ? other_name + " " + symbol + " DistributedTensor"
                                     : "DistributedTensor " + std::string(symbol) + " " + other_name;
  throw TypeError(upload_hint("the operand", a), ErrorContext{.op = expr, .node = a.node()});
}

void refuse_operand(const DistributedTensor& a, py::handle other, const char* method) {
  const std::string what = std::string("DistributedTensor.") + method;
  if (is_local_array(other)) {
    throw TypeError(upload_hint("other, a " + qualified_type_name(other) + ",", a),
                    ErrorContext{.op = what, .node = a.node()});
  }
  throw TypeError("other must be a DistributedTensor or a number, got " + qualified_type_name(other),
                  ErrorContext{.op = what});
}

}  // namespace thd::python
