// NCCL results as thd errors. Every NCCL call in thd goes through THD_NCCL_CALL, so
// a failure names the thd op, the rank and peer, the NCCL call, NCCL's description
// of the result and NCCL's last error message (which says what actually went wrong).
#pragma once

#include <nccl.h>

#include <exception>
#include <string>

namespace thd::detail::nccl {

// Where an NCCL call is made, for its error.
struct CallSite {
  std::string op;  // the thd operation ("all_reduce", "NCCL communicator set-up")
  int rank = -1;   // this process's world rank
  int peer = -1;   // the world rank the call concerns, -1 for none
};

// The thd error for `result`: ValueError for ncclInvalidArgument/ncclInvalidUsage
// (a bad call), PeerLost for ncclRemoteError (a peer failed), ConnectionError for
// ncclSystemError (a socket or system call failed), CudaError otherwise.
std::exception_ptr make_error(ncclResult_t result, const char* call, const CallSite& where, const char* file,
                              int line);
[[noreturn]] void throw_error(ncclResult_t result, const char* call, const CallSite& where, const char* file,
                              int line);

// Returns `result` when it is ncclSuccess or ncclInProgress (a nonblocking
// communicator still working: poll it), throws its error otherwise.
inline ncclResult_t check(ncclResult_t result, const char* call, const CallSite& where, const char* file, int line) {
  if (result != ncclSuccess && result != ncclInProgress) [[unlikely]] {
    throw_error(result, call, where, file, line);
  }
  return result;
}

}  // namespace thd::detail::nccl

// const ncclResult_t r = THD_NCCL_CALL(ncclAllReduce(...), site);  // success or in progress
#define THD_NCCL_CALL(call, where) ::thd::detail::nccl::check((call), #call, (where), __FILE__, __LINE__)
