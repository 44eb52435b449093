// The mpi backend's factory (its registration line is in datachannel/backends.cpp),
// and the MPI rendezvous: init_method mpi://, or env:// under an MPI launcher.
#pragma once

#include <memory>

#include <thd/store.h>

#include "datachannel/transport.h"

namespace thd::detail::mpi {

std::shared_ptr<Transport> make_transport(const DataChannelOptions& options);

// Rank and world size from MPI; rank 0 hosts a TCPStore and broadcasts its
// address (and, when none is configured, a fresh token, put in THD_AUTH_TOKEN of
// every rank so the channels made next find it) over MPI_COMM_WORLD.
RendezvousResult rendezvous(const RendezvousOptions& options);

}  // namespace thd::detail::mpi
