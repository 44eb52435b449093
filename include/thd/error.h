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
// An op failed on a worker. Raised on the master at the next sync point that
// depends on it (get(), item(), thd::synchronize()); context().op is the op that
// failed, context().node its node, and message() the worker's original error.
class RemoteError : public Error {
 public:
  RemoteError(std::string message, ErrorContext context, uint64_t op_id)
      : Error(std::move(message), std::move(context)), op_id_(op_id) {}
  // The failing op's id in the master's session (ids count ops from 1).
  uint64_t op_id() const noexcept { return op_id_; }

 private:
  uint64_t op_id_ = 0;
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
// A peer failed to prove the shared secret, or this process has none to prove.
class AuthError : public Error {
  using Error::Error;
};

}  // namespace thd
