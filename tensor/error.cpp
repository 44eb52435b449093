#include <thd/error.h>

#include <new>
#include <string>

namespace thd {

Error::Error(std::string message, ErrorContext context)
    : message_(std::move(message)), context_(std::move(context)) {
  compose();
}

void Error::set_node(int node) {
  context_.node = node;
  compose();
}

void Error::compose() {
  std::string w;
  if (!context_.op.empty()) w += context_.op + ": ";
  w += message_;
  std::string where;
  auto add = [&](const char* name, int v) {
    if (v < 0) return;
    if (!where.empty()) where += ", ";
    where += name;
    where += ' ';
    where += std::to_string(v);
  };
  add("node", context_.node);
  add("rank", context_.rank);
  add("peer", context_.peer);
  if (!where.empty()) w += " [" + where + "]";
  if (context_.file != nullptr) {
    w += " (";
    w += context_.file;
    w += ':';
    w += std::to_string(context_.line);
    w += ')';
  }
  what_ = std::move(w);
}

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Generic: return "generic";
    case ErrorKind::OutOfMemory: return "out_of_memory";
    case ErrorKind::Value: return "value";
    case ErrorKind::Shape: return "shape";
    case ErrorKind::Type: return "type";
    case ErrorKind::Index: return "index";
    case ErrorKind::Timeout: return "timeout";
    case ErrorKind::Connection: return "connection";
    case ErrorKind::NotImplemented: return "not_implemented";
    case ErrorKind::Cuda: return "cuda";
  }
  return "generic";
}

// Most-derived first: ShapeError is a ValueError, OutOfMemoryError a CudaError.
ErrorKind error_kind_of(const std::exception& e) {
  if (const auto* remote = dynamic_cast<const RemoteError*>(&e)) return remote->kind();
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr || dynamic_cast<const OutOfMemoryError*>(&e) != nullptr ||
      dynamic_cast<const HostOutOfMemoryError*>(&e) != nullptr) {
    return ErrorKind::OutOfMemory;
  }
  if (dynamic_cast<const ShapeError*>(&e) != nullptr) return ErrorKind::Shape;
  if (dynamic_cast<const ValueError*>(&e) != nullptr) return ErrorKind::Value;
  if (dynamic_cast<const TypeError*>(&e) != nullptr) return ErrorKind::Type;
  if (dynamic_cast<const IndexError*>(&e) != nullptr) return ErrorKind::Index;
  if (dynamic_cast<const TimeoutError*>(&e) != nullptr) return ErrorKind::Timeout;
  if (dynamic_cast<const ConnectionError*>(&e) != nullptr) return ErrorKind::Connection;
  if (dynamic_cast<const NotImplementedError*>(&e) != nullptr) return ErrorKind::NotImplemented;
  if (dynamic_cast<const CudaError*>(&e) != nullptr) return ErrorKind::Cuda;
  return ErrorKind::Generic;
}

namespace {

template <typename E>
std::exception_ptr make(std::string message, ErrorContext context, uint64_t op_id) {
  return std::make_exception_ptr(E(std::move(message), std::move(context), op_id));
}

}  // namespace

std::exception_ptr make_remote_error(ErrorKind kind, std::string message, ErrorContext context, uint64_t op_id) {
  switch (kind) {
    case ErrorKind::Generic: break;
    case ErrorKind::OutOfMemory: return make<RemoteOutOfMemoryError>(std::move(message), std::move(context), op_id);
    case ErrorKind::Value: return make<RemoteValueError>(std::move(message), std::move(context), op_id);
    case ErrorKind::Shape: return make<RemoteShapeError>(std::move(message), std::move(context), op_id);
    case ErrorKind::Type: return make<RemoteTypeError>(std::move(message), std::move(context), op_id);
    case ErrorKind::Index: return make<RemoteIndexError>(std::move(message), std::move(context), op_id);
    case ErrorKind::Timeout: return make<RemoteTimeoutError>(std::move(message), std::move(context), op_id);
    case ErrorKind::Connection: return make<RemoteConnectionError>(std::move(message), std::move(context), op_id);
    case ErrorKind::NotImplemented:
      return make<RemoteNotImplementedError>(std::move(message), std::move(context), op_id);
    case ErrorKind::Cuda: return make<RemoteCudaError>(std::move(message), std::move(context), op_id);
  }
  return std::make_exception_ptr(RemoteError(std::move(message), std::move(context), op_id, ErrorKind::Generic));
}

}  // namespace thd
