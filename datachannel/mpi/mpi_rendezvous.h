// The MPI rendezvous: init_method mpi://, or env:// under an MPI launcher.
#pragma once

#include <thd/store.h>

namespace thd::detail::mpi {

// Rank and world size from MPI; rank 0 hosts a TCPStore and broadcasts its
// address (and, when none is configured, a fresh token, put in THD_AUTH_TOKEN of
// every rank so the channels made next find it) over MPI_COMM_WORLD.
RendezvousResult rendezvous(const RendezvousOptions& options);

}  // namespace thd::detail::mpi
