// Waiting for a nonblocking MPI call within a deadline: what lets the rendezvous
// and a channel's set-up, which are collective over MPI_COMM_WORLD, fail with a
// TimeoutError when some rank never joins (it exited, is in MPI_Finalize, or runs
// something else), where MPI's blocking calls would spin forever.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

#include <mpi.h>

#include "datachannel/net/socket.h"

namespace thd::detail::mpi {

// Tests `request` until it completes or `deadline` passes (MPI moves a call only
// inside MPI calls: tested without pause at first, then with naps). On the
// deadline throws TimeoutError naming `op`, `call` and `timeout` (the limit the
// deadline came from). A collective cannot be withdrawn, so the request is left
// to MPI, and `buffers` (what it reads and writes) is kept until the process
// exits; a failing MPI_Test throws ConnectionError.
void wait_within(MPI_Request& request, net::Deadline deadline, std::chrono::milliseconds timeout, std::string_view op,
                 std::string_view call, std::shared_ptr<const void> buffers);

}  // namespace thd::detail::mpi
