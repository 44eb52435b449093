// Devices with torch's Python names: thd.device("cuda:1") (also a context manager,
// as torch.device is: tensors made inside live on that device of their node), and
// DistributedTensor's .device, .is_cuda, .cuda(), .cpu() and .to(device).
#include <charconv>
#include <string>

#include <thd/distributed.h>

#include "bindings.h"

namespace thd::python {

namespace {

using DT = DistributedTensor;
using PyDevice = PyScope<DeviceScope, Device>;

Device parse_device(const std::string& spec, std::optional<int> index) {
  const auto bad = [&](const std::string& why) {
    return ValueError("'" + spec + "' " + why + "; expected 'cpu', 'cuda' or 'cuda:<index>'",
                      ErrorContext{.op = "device"});
  };
  const size_t colon = spec.find(':');
  const std::string type = spec.substr(0, colon);
  std::optional<int> parsed;
  if (colon != std::string::npos) {
    const std::string digits = spec.substr(colon + 1);
    int value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || value < 0) {
      throw bad("has no valid device index");
    }
    parsed = value;
  }
  if (parsed && index && *parsed != *index) throw bad("names another index than index=" + std::to_string(*index));
  if (type == "cpu") {
    if (parsed || (index && *index != -1)) throw bad("is the CPU, which has no index");
    return Device::cpu();
  }
  if (type == "cuda") {
    const int i = parsed ? *parsed : index.value_or(0);
    if (i < 0) throw bad("has a negative index");
    return Device::cuda(i);
  }
  throw bad("is not a device type thd knows");
}

// A thd.device, or a string naming one.
Device device_of(const py::handle& h) {
  if (py::isinstance<PyDevice>(h)) return h.cast<const PyDevice&>().arg();
  if (py::isinstance<py::str>(h)) return parse_device(h.cast<std::string>(), std::nullopt);
  throw TypeError("device: expected a thd.device or a string such as 'cuda:0', got " +
                      std::string(py::str(py::type::of(h).attr("__name__"))),
                  ErrorContext{.op = "device"});
}

std::string repr(Device d) {
  if (d.is_cpu()) return "device(type='cpu')";
  return "device(type='cuda', index=" + std::to_string(d.index()) + ")";
}

}  // namespace

void bind_devices(py::module_& m) {
  py::class_<PyDevice> dev(m, "device", R"doc(device(spec, index=None): a device of a worker node, as torch.device.

spec is 'cpu', 'cuda' (GPU 0) or 'cuda:<i>'; device('cuda', 1) is cuda:1. Also a
context manager: tensors made inside `with thd.device('cuda:0'):` (creations and
uploads) live on that device of whichever node they go to, and a node without that
GPU refuses them (thd.RemoteError naming the node and the GPUs it has). Results of
ops stay on their operands' device. Nestable and per thread, as C++ thd::DeviceScope.)doc");
  dev.def(py::init([](const std::string& spec, std::optional<int> index) {
            return PyDevice(parse_device(spec, index), "device");
          }),
          py::arg("spec"), py::arg("index") = py::none());
  dev.def_property_readonly("type", [](const PyDevice& d) { return d.arg().is_cpu() ? "cpu" : "cuda"; },
                            "'cpu' or 'cuda'.");
  dev.def_property_readonly(
      "index", [](const PyDevice& d) -> std::optional<int> {
        if (d.arg().is_cpu()) return std::nullopt;
        return d.arg().index();
      },
      "The GPU's index on its node; None for the CPU.");
  dev.def("__str__", [](const PyDevice& d) { return d.arg().str(); });
  dev.def("__repr__", [](const PyDevice& d) { return repr(d.arg()); });
  dev.def("__eq__", [](const PyDevice& d, const py::object& other) {
    if (!py::isinstance<PyDevice>(other) && !py::isinstance<py::str>(other)) return false;
    return d.arg() == device_of(other);
  });
  dev.def("__hash__", [](const PyDevice& d) { return py::hash(py::str(d.arg().str())); });
  PyDevice::bind_context(dev);
  m.def("_device_of", [](const py::handle& h) { return PyDevice(device_of(h), "device"); }, py::arg("device"));
  m.def("current_device", [] { return PyDevice(current_device(), "device"); },
        "The device tensors are made on in this thread (the innermost `with thd.device(...)`; cpu outside any).");

  auto c = py::reinterpret_borrow<py::class_<DT>>(m.attr("DistributedTensor"));
  c.def_property_readonly("device", [](const DT& t) { return PyDevice(t.device(), "device"); },
                          "The device of its node it lives on (a thd.device).");
  c.def_property_readonly("is_cuda", &DT::is_cuda, "True when it lives on a GPU of its node.");
  c.def("cuda", &DT::cuda, py::arg("index") = 0, Release(),
        "A copy on GPU `index` of its node (itself when already there), made by its worker.");
  c.def("cpu", &DT::cpu, Release(), "A copy in its node's host memory (itself when already there).");
  c.def(
      "to",
      [](const DT& t, const py::handle& device, bool copy) {
        const Device d = device_of(device);
        py::gil_scoped_release release;
        return t.to(d, copy);
      },
      py::arg("device"), py::arg("copy") = false,
      "A copy on `device` of its node (a thd.device or 'cpu', 'cuda:1'; itself when already there unless copy).");
}

}  // namespace thd::python
