// C++ thd::Error and its subclasses become the Python classes of thd/errors.py,
// the most-derived one that matches, with the error's context as attributes.
#include <exception>

#include "bindings.h"

namespace thd::python {

namespace {

py::object optional_int(int v) { return v < 0 ? py::object(py::none()) : py::object(py::int_(v)); }

// The thd.errors class of a RemoteError of `kind` (include/thd/error.h's subclasses).
const char* remote_class(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Generic: return "RemoteError";
    case ErrorKind::OutOfMemory: return "RemoteOutOfMemoryError";
    case ErrorKind::Value: return "RemoteValueError";
    case ErrorKind::Shape: return "RemoteShapeError";
    case ErrorKind::Type: return "RemoteTypeError";
    case ErrorKind::Index: return "RemoteIndexError";
    case ErrorKind::Timeout: return "RemoteTimeoutError";
    case ErrorKind::Connection: return "RemoteConnectionError";
    case ErrorKind::NotImplemented: return "RemoteNotImplementedError";
    case ErrorKind::Cuda: return "RemoteCudaError";
  }
  return "RemoteError";
}

// Raises thd.errors.<name>(message, op=..., ...) as the pending Python error.
void raise(const char* name, const Error& e, py::dict extra = py::dict()) {
  const ErrorContext& c = e.context();
  py::object cls = py::module_::import("thd.errors").attr(name);
  py::dict kwargs = extra;
  kwargs["op"] = c.op.empty() ? py::object(py::none()) : py::object(py::str(c.op));
  kwargs["node"] = optional_int(c.node);
  kwargs["rank"] = optional_int(c.rank);
  kwargs["peer"] = optional_int(c.peer);
  kwargs["file"] = c.file == nullptr ? py::object(py::none()) : py::object(py::str(c.file));
  kwargs["line"] = c.file == nullptr ? py::object(py::none()) : py::object(py::int_(c.line));
  kwargs["what"] = py::str(e.what());
  py::object instance = cls(py::str(e.message()), **kwargs);
  PyErr_SetObject(cls.ptr(), instance.ptr());
}

// Most-derived first: a catch clause also takes every subclass of its type.
void translate(std::exception_ptr p) {
  if (!p) return;
  try {
    std::rethrow_exception(p);
  } catch (const ShapeError& e) {
    raise("ShapeError", e);
  } catch (const ValueError& e) {
    raise("ValueError", e);
  } catch (const TypeError& e) {
    raise("TypeError", e);
  } catch (const IndexError& e) {
    raise("IndexError", e);
  } catch (const TimeoutError& e) {
    raise("TimeoutError", e);
  } catch (const WorkerLost& e) {
    raise("WorkerLost", e);
  } catch (const PeerLost& e) {
    raise("PeerLost", e);
  } catch (const ConnectionError& e) {
    raise("ConnectionError", e);
  } catch (const RemoteError& e) {
    py::dict extra;
    extra["op_id"] = py::int_(e.op_id());
    extra["kind"] = py::str(error_kind_name(e.kind()));
    raise(remote_class(e.kind()), e, extra);
  } catch (const NotImplementedError& e) {
    raise("NotImplementedError", e);
  } catch (const OutOfMemoryError& e) {
    raise("OutOfMemoryError", e);
  } catch (const HostOutOfMemoryError& e) {
    raise("HostOutOfMemoryError", e);
  } catch (const CudaError& e) {
    raise("CudaError", e);
  } catch (const AuthError& e) {
    raise("AuthError", e);
  } catch (const Error& e) {
    raise("Error", e);
  }
}

}  // namespace

void bind_errors(py::module_& m) {
  (void)m;
  py::register_exception_translator(&translate);
}

}  // namespace thd::python
