// The process's MPI library: initialized once, at MPI_THREAD_MULTIPLE, by the first
// mpi channel or MPI rendezvous of the process (or by the program itself before),
// and finalized at exit when thd initialized it.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include <mpi.h>

#include "datachannel/net/auth.h"

namespace thd::detail::mpi {

// MPI_Init_thread(MPI_THREAD_MULTIPLE) unless MPI is initialized already; either
// way ConnectionError (naming `op`) when the library does not give
// MPI_THREAD_MULTIPLE, or when MPI was finalized.
void ensure_initialized(std::string_view op);

// Called (under no lock of MPI's) right before thd's MPI_Finalize at exit, so
// channels still alive then (a worker exits without unwinding) stop calling MPI.
// `key` identifies the registration for unregister_before_finalize.
void register_before_finalize(const void* key, std::function<void()> quiesce);
void unregister_before_finalize(const void* key);

// MPI_Error_string of an error code: "MPI_ERR_TRUNCATE: message truncated".
std::string error_text(int code);

// Throws ConnectionError naming `op` and `call` when `code` is not MPI_SUCCESS.
void check(int code, std::string_view op, std::string_view call);

// True when an MPI launcher started this process (mpirun/mpiexec of Open MPI or
// MPICH, or srun with PMI/PMIx): its rank and size can come from MPI.
bool launched_by_mpi(const net::EnvLookup& env = net::process_env);

}  // namespace thd::detail::mpi
