// DLPack, the Python protocol (https://dmlc.github.io/dlpack/latest/python_spec.html):
// thd.Tensor.__dlpack__ / __dlpack_device__ hand a local tensor's memory to NumPy,
// torch and any other consumer, and thd.from_dlpack takes theirs, both without a
// copy. Whoever made the memory keeps it alive until the other side lets go: the
// exported tensor travels in the managed tensor's context, and an imported one's
// deleter runs when the last thd tensor over its memory goes.
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "bindings.h"
#include "dlpack.h"

namespace thd::python {

namespace {

using namespace dlpack;

// ---- dtypes ------------------------------------------------------------------------

DLDataType to_dl(DType d) {
  const auto bits = static_cast<uint8_t>(element_size(d) * 8);
  switch (d) {
    case DType::Bool: return {kDLBool, 8, 1};
    case DType::UInt8: return {kDLUInt, bits, 1};
    case DType::Int8:
    case DType::Int32:
    case DType::Int64: return {kDLInt, bits, 1};
    case DType::Float16:
    case DType::Float32:
    case DType::Float64: return {kDLFloat, bits, 1};
    case DType::BFloat16: return {kDLBfloat, 16, 1};
  }
  return {kDLOpaqueHandle, 0, 1};
}

const char* code_name(uint8_t code) {
  switch (code) {
    case kDLInt: return "int";
    case kDLUInt: return "uint";
    case kDLFloat: return "float";
    case kDLOpaqueHandle: return "opaque handle";
    case kDLBfloat: return "bfloat";
    case kDLComplex: return "complex";
    case kDLBool: return "bool";
    default: return "unknown";
  }
}

DType from_dl(DLDataType t) {
  if (t.lanes == 1) {
    for (int i = 0; i < kNumDTypes; ++i) {
      const auto d = static_cast<DType>(i);
      const DLDataType ours = to_dl(d);
      if (ours.code == t.code && ours.bits == t.bits) return d;
    }
  }
  throw TypeError("DLPack dtype (code " + std::to_string(t.code) + " " + code_name(t.code) + ", " +
                      std::to_string(t.bits) + " bits, lanes " + std::to_string(t.lanes) +
                      ") has no thd dtype (thd has bool, uint8, int8, int32, int64, float16, bfloat16, float32, "
                      "float64)",
                  ErrorContext{.op = "from_dlpack"});
}

// ---- export ------------------------------------------------------------------------

// What an exported managed tensor points into: the tensor (which holds the memory)
// and the shape and strides its DLTensor names.
template <typename Managed>
struct Export {
  Tensor tensor;
  Shape shape;
  Shape strides;
  Managed managed{};
};

template <typename Managed>
void delete_export(Managed* self) {
  delete static_cast<Export<Managed>*>(self->manager_ctx);
}

// A capsule nobody consumed still owns its tensor; a consumed one was renamed and
// belongs to its consumer.
template <typename Managed>
void capsule_destructor(PyObject* capsule) {
  const char* name = std::is_same_v<Managed, DLManagedTensorVersioned> ? kVersionedCapsuleName : kCapsuleName;
  if (PyCapsule_IsValid(capsule, name) == 0) return;
  auto* m = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (m->deleter != nullptr) m->deleter(m);
}

template <typename Managed>
py::capsule export_capsule(const Tensor& t, uint64_t flags) {
  auto e = std::make_unique<Export<Managed>>();
  e->tensor = t;
  e->shape = t.shape();
  e->strides = t.strides();
  Managed& m = e->managed;
  DLTensor& dl = m.dl_tensor;
  dl.data = t.numel() == 0 ? nullptr : t.data_ptr();
  dl.device = {kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(t.dim());
  dl.dtype = to_dl(t.dtype());
  dl.shape = e->shape.data();
  dl.strides = e->strides.data();
  dl.byte_offset = 0;
  m.manager_ctx = e.get();
  m.deleter = &delete_export<Managed>;
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    m.version = {kDLPackMajorVersion, kDLPackMinorVersion};
    m.flags = flags;
  }
  const char* name = std::is_same_v<Managed, DLManagedTensorVersioned> ? kVersionedCapsuleName : kCapsuleName;
  PyObject* capsule = PyCapsule_New(&m, name, &capsule_destructor<Managed>);
  if (capsule == nullptr) throw py::error_already_set();
  e.release();  // the capsule owns it now
  return py::reinterpret_steal<py::capsule>(capsule);
}

// (device type, device id) from a Python pair; false when it is not one.
bool device_pair(const py::handle& o, int64_t& type, int64_t& id) {
  if (!py::isinstance<py::sequence>(o) || py::len(o) != 2) return false;
  const py::sequence s = py::reinterpret_borrow<py::sequence>(o);
  if (PyIndex_Check(s[0].ptr()) == 0 || PyIndex_Check(s[1].ptr()) == 0) return false;
  type = py::int_(s[0]).cast<int64_t>();
  id = py::int_(s[1]).cast<int64_t>();
  return true;
}

py::capsule export_dlpack(const Tensor& t, const py::object& stream, const py::object& max_version,
                          const py::object& dl_device, const py::object& copy) {
  if (!t.device().is_cpu()) {
    throw py::buffer_error("__dlpack__: the tensor is on " + t.device().str() + "; thd exports host memory only");
  }
  // Host memory has no streams to order the consumer's work after ours.
  if (!stream.is_none()) {
    throw ValueError("a CPU tensor takes stream=None, got " + std::string(py::repr(stream)),
                     ErrorContext{.op = "__dlpack__"});
  }
  if (!dl_device.is_none()) {
    int64_t type = 0;
    int64_t id = 0;
    if (!device_pair(dl_device, type, id)) {
      throw TypeError("dl_device is a (device_type, device_id) pair, got " +
                          std::string(py::repr(dl_device)),
                      ErrorContext{.op = "__dlpack__"});
    }
    if (type != kDLCPU || id != 0) {
      throw py::buffer_error("__dlpack__: the tensor is in host memory (kDLCPU, 0); it cannot be exported to "
                             "DLPack device (" + std::to_string(type) + ", " + std::to_string(id) + ")");
    }
  }
  const bool copied = !copy.is_none() && copy.cast<bool>();
  const Tensor out = copied ? t.clone() : t;
  bool versioned = false;
  if (!max_version.is_none()) {
    int64_t major = 0;
    int64_t minor = 0;
    if (!device_pair(max_version, major, minor)) {
      throw TypeError("max_version is a (major, minor) pair, got " + std::string(py::repr(max_version)),
                      ErrorContext{.op = "__dlpack__"});
    }
    versioned = major >= kDLPackMajorVersion;
  }
  if (versioned) return export_capsule<DLManagedTensorVersioned>(out, copied ? kFlagIsCopied : 0);
  return export_capsule<DLManagedTensor>(out, 0);
}

// ---- import ------------------------------------------------------------------------

// Owns a consumed managed tensor: its deleter runs when the last thd tensor over its
// memory goes, on whatever thread that is. Producers' deleters may touch Python
// objects (NumPy's drops a reference to the array), so it runs under the GIL, and
// not at all once the interpreter is gone.
template <typename Managed>
struct Imported {
  Managed* managed;
  explicit Imported(Managed* m) : managed(m) {}
  Imported(const Imported&) = delete;
  Imported& operator=(const Imported&) = delete;
  ~Imported() {
    if (managed->deleter == nullptr || Py_IsInitialized() == 0) return;
    py::gil_scoped_acquire gil;
    managed->deleter(managed);
  }
};

std::string device_name(int64_t type) {
  switch (type) {
    case kDLCPU: return "CPU";
    case kDLCUDA: return "CUDA";
    case kDLCUDAHost: return "CUDAHost";
    case kDLOpenCL: return "OpenCL";
    case kDLVulkan: return "Vulkan";
    case kDLMetal: return "Metal";
    case kDLROCM: return "ROCM";
    case kDLCUDAManaged: return "CUDAManaged";
    case kDLOneAPI: return "OneAPI";
    default: return "type " + std::to_string(type);
  }
}

// Host memory the CPU reads directly: the only kind a local thd.Tensor holds.
void check_host(int64_t type, int64_t id) {
  if (type == kDLCPU || type == kDLCUDAHost) return;
  throw ValueError("the tensor is on DLPack device " + device_name(type) + ":" + std::to_string(id) +
                       "; a local thd.Tensor lives in host memory, so move it there first (torch: .cpu())",
                   ErrorContext{.op = "from_dlpack"});
}

struct Layout {
  DType dtype;
  Shape shape;
  Shape strides;
  void* data = nullptr;
};

// Everything that can be wrong with a DLTensor, found before the capsule is
// consumed, so that a refused one stays its producer's.
Layout check(const DLTensor& dl) {
  check_host(dl.device.device_type, dl.device.device_id);
  Layout l;
  l.dtype = from_dl(dl.dtype);
  if (dl.ndim < 0 || (dl.ndim > 0 && dl.shape == nullptr)) {
    throw ValueError("the DLTensor has ndim " + std::to_string(dl.ndim) + " and shape " +
                         (dl.shape == nullptr ? "null" : "given"),
                     ErrorContext{.op = "from_dlpack"});
  }
  l.shape.assign(dl.shape, dl.shape + dl.ndim);
  int64_t numel = 1;
  for (const int64_t s : l.shape) {
    if (s < 0) throw ValueError("negative size in shape " + shape_str(l.shape), ErrorContext{.op = "from_dlpack"});
    numel *= s;
  }
  if (dl.strides != nullptr) {
    l.strides.assign(dl.strides, dl.strides + dl.ndim);
    for (size_t i = 0; i < l.strides.size(); ++i) {
      // A stride over a dim of size 1 (or 0) never moves; producers may set anything there.
      if (l.shape[i] <= 1 && l.strides[i] < 0) l.strides[i] = 0;
      if (l.strides[i] < 0) {
        throw ValueError("negative strides " + shape_str(l.strides) +
                             " (a reversed view) have no thd equivalent; pass a contiguous copy",
                         ErrorContext{.op = "from_dlpack"});
      }
    }
  }
  if (numel > 0) {
    if (dl.data == nullptr) throw ValueError("the DLTensor's data is null", ErrorContext{.op = "from_dlpack"});
    l.data = static_cast<char*>(dl.data) + dl.byte_offset;
    // thd's kernels read whole elements at their natural alignment.
    if (reinterpret_cast<uintptr_t>(l.data) % element_size(l.dtype) != 0) {
      throw ValueError("the data (with its byte_offset) is not aligned to its " +
                           std::to_string(element_size(l.dtype)) + "-byte elements; pass an aligned copy",
                       ErrorContext{.op = "from_dlpack"});
    }
  }
  return l;
}

template <typename Managed>
Tensor consume(PyObject* capsule, const char* name, const char* used_name) {
  auto* m = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (m == nullptr) throw py::error_already_set();
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    if (m->version.major > kDLPackMajorVersion) {
      throw py::buffer_error("from_dlpack: the capsule holds a DLPack " + std::to_string(m->version.major) + "." +
                             std::to_string(m->version.minor) + " tensor; thd reads DLPack " +
                             std::to_string(kDLPackMajorVersion) + ".x");
    }
  }
  const Layout l = check(m->dl_tensor);
  if (PyCapsule_SetName(capsule, used_name) != 0) throw py::error_already_set();
  // From here on the tensor is ours: the owner releases it on every path.
  auto owner = std::make_shared<Imported<Managed>>(m);
  bool read_only = false;
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) read_only = (m->flags & kFlagReadOnly) != 0;
  if (l.data == nullptr) return Tensor::empty(l.shape, l.dtype);
  Tensor t = Tensor::from_blob(l.data, l.shape, l.dtype, l.strides, [owner](void*) mutable { owner.reset(); });
  // thd tensors are all writable: memory its producer marked read-only is copied
  // (as thd.from_numpy copies a read-only array).
  if (read_only) return t.clone();
  return t;
}

Tensor from_capsule(const py::handle& o) {
  PyObject* p = o.ptr();
  if (PyCapsule_IsValid(p, kVersionedCapsuleName) != 0) {
    return consume<DLManagedTensorVersioned>(p, kVersionedCapsuleName, kUsedVersionedCapsuleName);
  }
  if (PyCapsule_IsValid(p, kCapsuleName) != 0) return consume<DLManagedTensor>(p, kCapsuleName, kUsedCapsuleName);
  const char* name = PyCapsule_GetName(p);
  if (name == nullptr) throw py::error_already_set();
  const std::string n = name;
  if (n == kUsedCapsuleName || n == kUsedVersionedCapsuleName) {
    throw ValueError("this DLPack capsule was consumed already (a capsule gives up its tensor once; "
                     "call __dlpack__() again for another)",
                     ErrorContext{.op = "from_dlpack"});
  }
  throw TypeError("a capsule named \"" + n + "\" holds no DLPack tensor", ErrorContext{.op = "from_dlpack"});
}

Tensor from_dlpack(const py::object& x) {
  if (PyCapsule_CheckExact(x.ptr()) != 0) return from_capsule(x);
  if (!py::hasattr(x, "__dlpack__")) {
    throw TypeError("expected an object with __dlpack__ (a NumPy array, a torch tensor, ...) or a "
                        "DLPack capsule, got " + std::string(py::str(py::type::of(x).attr("__name__"))),
                    ErrorContext{.op = "from_dlpack"});
  }
  // Refused before __dlpack__, which a GPU producer would answer with work on a stream.
  if (py::hasattr(x, "__dlpack_device__")) {
    int64_t type = 0;
    int64_t id = 0;
    const py::object dev = x.attr("__dlpack_device__")();
    if (!device_pair(dev, type, id)) {
      throw TypeError("__dlpack_device__() gave " + std::string(py::repr(dev)) +
                          ", not a (device_type, device_id) pair",
                      ErrorContext{.op = "from_dlpack"});
    }
    check_host(type, id);
  }
  // DLPack 1.0 when the producer speaks it (max_version), else the classic capsule:
  // the spec's way to ask.
  const py::object method = x.attr("__dlpack__");
  py::object capsule;
  try {
    capsule = method(py::arg("max_version") = py::make_tuple(kDLPackMajorVersion, kDLPackMinorVersion));
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    capsule = method();
  }
  if (PyCapsule_CheckExact(capsule.ptr()) == 0) {
    throw TypeError("__dlpack__() gave a " + std::string(py::str(py::type::of(capsule).attr("__name__"))) +
                        ", not a capsule",
                    ErrorContext{.op = "from_dlpack"});
  }
  return from_capsule(capsule);
}

}  // namespace

void bind_dlpack(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  cls.def("__dlpack__", &export_dlpack, py::arg("stream") = py::none(), py::kw_only(),
          py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
          "The DLPack capsule of the tensor's memory (no copy unless copy=True): DLPack 1.0's "
          "\"dltensor_versioned\" when max_version is (1, 0) or later, else the classic \"dltensor\". "
          "stream must be None (host memory).");
  cls.def("__dlpack_device__", [](const Tensor&) { return py::make_tuple(static_cast<int>(kDLCPU), 0); },
          "(device_type, device_id) of DLPack: (1, 0), host memory (kDLCPU).");
  m.def("from_dlpack", &from_dlpack, py::arg("x"),
        R"doc(A local thd.Tensor that shares the memory of `x`: any object with __dlpack__
(a NumPy array, a torch tensor, ...) or a DLPack capsule, as torch.from_dlpack.

Writes show in both, and the tensor keeps the producer's memory alive. Host memory
only (a CUDA tensor raises thd.ValueError), non-negative strides, and the dtypes thd
has (others raise thd.TypeError). A capsule gives up its tensor once: a second
from_dlpack of it raises thd.ValueError.)doc");
}

}  // namespace thd::python
