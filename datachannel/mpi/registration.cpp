// The mpi backend's registration (datachannel/backend_registration.h): the
// software-matching transport over MPI's pipe, and the mpi:// rendezvous.
#include "datachannel/backend_registration.h"
#include "datachannel/mpi/mpi_pipe.h"
#include "datachannel/mpi/mpi_rendezvous.h"
#include "datachannel/pipe/pipe_transport.h"

namespace thd::detail::mpi {
namespace {

std::shared_ptr<Transport> make_transport(const DataChannelOptions& options) {
  return pipe::make_pipe_transport(make_pipe(options), options);
}

}  // namespace
}  // namespace thd::detail::mpi

extern "C" const thd::detail::BackendRegistration* thd_backend_mpi() {
  static const thd::detail::BackendRegistration registration{
      .name = "mpi",
      .make_transport = &thd::detail::mpi::make_transport,
      .rendezvous = &thd::detail::mpi::rendezvous,
  };
  return &registration;
}
