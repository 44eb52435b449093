#include "datachannel/nccl/nccl_error.h"

#include <fmt/format.h>

#include <thd/error.h>

#include "datachannel/check.h"

namespace thd::detail::nccl {

namespace {

const char* result_name(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    case ncclNumResults: break;
  }
  return "ncclResult";
}

template <typename E>
std::exception_ptr make(std::string message, ErrorContext ctx) {
  return std::make_exception_ptr(E(std::move(message), std::move(ctx)));
}

}  // namespace

std::exception_ptr make_error(ncclResult_t result, const char* call, const CallSite& where, const char* file,
                              int line) {
  // ncclGetLastError keeps the text of the last failure in this process (its
  // argument is unused): it is what says which peer, socket or CUDA call failed.
  const char* last = ncclGetLastError(nullptr);
  std::string message = fmt::format("{}: {} (in {})", result_name(result), ncclGetErrorString(result), call);
  if (last != nullptr && last[0] != '\0') message += fmt::format("; NCCL's last error: {}", last);
  if (result == ncclSystemError || result == ncclInternalError || result == ncclRemoteError) {
    message += "; NCCL_DEBUG=WARN (or INFO) prints NCCL's own account";
  }
  ErrorContext ctx = context_at(where.op, where.rank, where.peer, file, line);
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage: return make<ValueError>(std::move(message), std::move(ctx));
    case ncclRemoteError: return make<PeerLost>(std::move(message), std::move(ctx));
    case ncclSystemError: return make<ConnectionError>(std::move(message), std::move(ctx));
    default: return make<CudaError>(std::move(message), std::move(ctx));
  }
}

void throw_error(ncclResult_t result, const char* call, const CallSite& where, const char* file, int line) {
  std::rethrow_exception(make_error(result, call, where, file, line));
}

}  // namespace thd::detail::nccl
