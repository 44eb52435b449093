// The ucx backend's registration (datachannel/backend_registration.h): the
// software-matching transport over UCX's pipe.
#include "datachannel/backend_registration.h"
#include "datachannel/pipe/pipe_transport.h"
#include "datachannel/ucx/ucx_pipe.h"

namespace thd::detail::ucx {
namespace {

std::shared_ptr<Transport> make_transport(const DataChannelOptions& options) {
  return pipe::make_pipe_transport(make_pipe(options), options);
}

}  // namespace
}  // namespace thd::detail::ucx

extern "C" const thd::detail::BackendRegistration* thd_backend_ucx() {
  static const thd::detail::BackendRegistration registration{
      .name = "ucx",
      .make_transport = &thd::detail::ucx::make_transport,
  };
  return &registration;
}
