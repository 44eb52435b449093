// The mpi backend's MessagePipe: nonblocking MPI point-to-point on a duplicate of
// MPI_COMM_WORLD (its errors returned, not fatal), progressed with MPI_Testsome.
// MPI has no wait object, so an idle pipe sleeps in short, growing naps
// (docs/backends.md, "mpi").
#pragma once

#include <memory>

#include <thd/datachannel.h>

#include "datachannel/pipe/message_pipe.h"

namespace thd::detail::mpi {

// Initializes MPI (MPI_THREAD_MULTIPLE) if needed and checks that options.rank and
// world_size are this process's MPI rank and size (ValueError otherwise).
std::unique_ptr<pipe::MessagePipe> make_pipe(const DataChannelOptions& options);

}  // namespace thd::detail::mpi
