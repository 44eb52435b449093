// The thd exception hierarchy. Every error thd raises derives from thd::Error and
// carries what is known of where it happened: the op, and for distributed errors
// the rank, node and peer involved, plus the source location that raised it.
#pragma once

#include <cstdint>
#include <exception>
#include <string>

namespace thd {

struct ErrorContext {
  std::string op;      // the operation that failed ("add", "all_reduce", ...)
  int rank = -1;       // DataChannel rank that raised it, -1 if not distributed
  int node = -1;       // worker node involved, -1 if none
  int peer = -1;       // remote rank involved, -1 if none
  const char* file = nullptr;  // where in thd it was raised
  int line = 0;
};

class Error : public std::exception {
 public:
  explicit Error(std::string message, ErrorContext context = {});

  // "op: message [node 1, rank 2] (tensor/views.cpp:42)"
  const char* what() const noexcept override { return what_.c_str(); }
  // The message alone, without op or location.
  const std::string& message() const noexcept { return message_; }
  const ErrorContext& context() const noexcept { return context_; }
  // Names the node the error concerns (the master adds it to errors its checks
  // raise, rethrowing the same exception).
  void set_node(int node);

 private:
  void compose();

  std::string message_;
  ErrorContext context_;
  std::string what_;
};

// A value is outside what the op accepts (bad size, bad argument).
class ValueError : public Error {
  using Error::Error;
};
// Shapes do not fit together (broadcasting, matmul, cat, view).
class ShapeError : public ValueError {
  using ValueError::ValueError;
};
// A dtype the op does not support, or dtypes that do not fit together.
class TypeError : public Error {
  using Error::Error;
};
// An index or dimension out of range.
class IndexError : public Error {
  using Error::Error;
};
// A wait that ran past its deadline.
class TimeoutError : public Error {
  using Error::Error;
};
// A connection could not be made or was broken (refused, reset, unreachable).
class ConnectionError : public Error {
  using Error::Error;
};
// A peer (context().peer) disappeared: its connection closed or it stopped
// answering. Pending and later operations involving it fail with this.
class PeerLost : public ConnectionError {
  using ConnectionError::ConnectionError;
};
// A worker node (context().node) died or its connection broke: every pending and
// later operation on that node fails with this; other nodes keep working.
class WorkerLost : public PeerLost {
  using PeerLost::PeerLost;
};
// The op exists but not for these arguments' device in this build (an op with no
// CUDA kernel yet, a CUDA tensor in a build without CUDA); message() says which.
class NotImplementedError : public Error {
  using Error::Error;
};
// A CUDA call failed: message() carries the CUDA error's name and string
// ("cudaErrorMemoryAllocation: out of memory") and context().op the thd op.
class CudaError : public Error {
  using Error::Error;
};
// A CUDA device ran out of memory (torch.cuda.OutOfMemoryError), after the caching
// allocator returned what it held and retried.
class OutOfMemoryError : public CudaError {
  using CudaError::CudaError;
};
// The host could not give a tensor the memory it asked for (message() names the
// bytes), or a worker's tensors would take it past its session's memory limit.
class HostOutOfMemoryError : public Error {
  using Error::Error;
};
// A peer failed to prove the shared secret, or this process has none to prove.
class AuthError : public Error {
  using Error::Error;
};

// What kind of error an op failed with on its worker, from the class of the
// worker's exception: RemoteError::kind(), and the subclass of RemoteError the
// master raises.
enum class ErrorKind : uint8_t {
  Generic,         // any other error
  OutOfMemory,     // std::bad_alloc, HostOutOfMemoryError, OutOfMemoryError
  Value,           // ValueError
  Shape,           // ShapeError
  Type,            // TypeError
  Index,           // IndexError
  Timeout,         // TimeoutError
  Connection,      // ConnectionError, PeerLost, WorkerLost
  NotImplemented,  // NotImplementedError
  Cuda,            // CudaError other than out of memory
};
// "out_of_memory", "shape", ...: the kind's name (Python's RemoteError.kind).
const char* error_kind_name(ErrorKind kind);
// The kind of `e` by its most-derived class (a RemoteError: its kind()).
ErrorKind error_kind_of(const std::exception& e);

// An op failed on a worker. Raised on the master at the next sync point that
// depends on it (get(), item(), thd::synchronize()); context().op is the op that
// failed, context().node its node, and message() the worker's original error.
// The master raises the subclass of the error's kind (RemoteOutOfMemoryError, ...;
// RemoteError itself for ErrorKind::Generic): catch one kind by type, or every
// remote failure as RemoteError.
class RemoteError : public Error {
 public:
  RemoteError(std::string message, ErrorContext context, uint64_t op_id, ErrorKind kind = ErrorKind::Generic)
      : Error(std::move(message), std::move(context)), op_id_(op_id), kind_(kind) {}
  // The failing op's id in the master's session (ids count ops from 1).
  uint64_t op_id() const noexcept { return op_id_; }
  // What kind of error the worker raised.
  ErrorKind kind() const noexcept { return kind_; }

 private:
  uint64_t op_id_ = 0;
  ErrorKind kind_ = ErrorKind::Generic;
};

// The RemoteError subclass of one kind: what a worker's error of that kind becomes.
template <ErrorKind K, typename Base = RemoteError>
class RemoteErrorOf : public Base {
 public:
  static constexpr ErrorKind kKind = K;
  RemoteErrorOf(std::string message, ErrorContext context, uint64_t op_id)
      : Base(std::move(message), std::move(context), op_id, K) {}

 protected:
  // For a subclass kind (RemoteShapeError under RemoteValueError).
  RemoteErrorOf(std::string message, ErrorContext context, uint64_t op_id, ErrorKind kind)
      : Base(std::move(message), std::move(context), op_id, kind) {}
};
// A worker ran out of memory: host or GPU (torch.OutOfMemoryError), or its session's limit.
using RemoteOutOfMemoryError = RemoteErrorOf<ErrorKind::OutOfMemory>;
using RemoteValueError = RemoteErrorOf<ErrorKind::Value>;
using RemoteShapeError = RemoteErrorOf<ErrorKind::Shape, RemoteValueError>;
using RemoteTypeError = RemoteErrorOf<ErrorKind::Type>;
using RemoteIndexError = RemoteErrorOf<ErrorKind::Index>;
using RemoteTimeoutError = RemoteErrorOf<ErrorKind::Timeout>;
using RemoteConnectionError = RemoteErrorOf<ErrorKind::Connection>;
using RemoteNotImplementedError = RemoteErrorOf<ErrorKind::NotImplemented>;
using RemoteCudaError = RemoteErrorOf<ErrorKind::Cuda>;

// The RemoteError of `kind` (its subclass) as an exception_ptr, ready to rethrow.
std::exception_ptr make_remote_error(ErrorKind kind, std::string message, ErrorContext context, uint64_t op_id);

}  // namespace thd
