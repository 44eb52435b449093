// The registration line of each backend: name -> factory, under the option that
// builds it.
#include <thd/config.h>

#include "datachannel/backends.h"
#include "datachannel/tcp/tcp_transport.h"
#include "datachannel/pipe/pipe_transport.h"
#if THD_WITH_MPI
#include "datachannel/mpi/mpi_library.h"
#include "datachannel/mpi/mpi_pipe.h"
#include "datachannel/mpi/mpi_rendezvous.h"
#endif
#if THD_WITH_UCX
#include "datachannel/ucx/ucx_pipe.h"
#endif
#if THD_WITH_LIBFABRIC
#include "datachannel/libfabric/libfabric_pipe.h"
#endif
#if THD_WITH_NCCL
#include "datachannel/nccl/nccl_backend.h"
#endif

namespace thd::detail {

const std::vector<BackendEntry>& backend_table() {
  static const std::vector<BackendEntry> table = {
      {"tcp", &tcp::make_transport},
#if THD_WITH_MPI
      {"mpi", [](const DataChannelOptions& o) { return pipe::make_pipe_transport(mpi::make_pipe(o), o); }},
#endif
#if THD_WITH_UCX
      {"ucx", [](const DataChannelOptions& o) { return pipe::make_pipe_transport(ucx::make_pipe(o), o); }},
#endif
#if THD_WITH_LIBFABRIC
      {"libfabric",
       [](const DataChannelOptions& o) { return pipe::make_pipe_transport(libfabric::make_pipe(o), o); }},
#endif
#if THD_WITH_NCCL
      {"nccl", &nccl::make_transport},
#endif
  };
  return table;
}

// Backends thd knows but this build may leave out, and what builds them.
const std::vector<OptionalBackend>& optional_backends() {
  static const std::vector<OptionalBackend> table = {
      {"mpi", "THD_WITH_MPI", "an MPI implementation (libopenmpi-dev)"},
      {"ucx", "THD_WITH_UCX", "UCX (libucx-dev)"},
      {"libfabric", "THD_WITH_LIBFABRIC", "libfabric (libfabric-dev)"},
      {"nccl", "THD_WITH_NCCL", "CUDA and NCCL"},
  };
  return table;
}

std::unique_ptr<DeviceCollectives> make_device_collectives([[maybe_unused]] int world_rank,
                                                           [[maybe_unused]] int world_size) {
#if THD_WITH_NCCL
  return std::make_unique<nccl::NcclCollectives>(world_rank, world_size);
#else
  return nullptr;
#endif
}

const std::vector<RendezvousScheme>& rendezvous_schemes() {
  static const std::vector<RendezvousScheme> table = {
#if THD_WITH_MPI
      {"mpi", &mpi::rendezvous, [] { return mpi::launched_by_mpi(); }},
#endif
  };
  return table;
}

}  // namespace thd::detail
