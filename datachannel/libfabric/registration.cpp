// The libfabric backend's registration (datachannel/backend_registration.h): the
// software-matching transport over libfabric's pipe.
#include "datachannel/backend_registration.h"
#include "datachannel/libfabric/libfabric_pipe.h"
#include "datachannel/pipe/pipe_transport.h"

namespace thd::detail::libfabric {
namespace {

std::shared_ptr<Transport> make_transport(const DataChannelOptions& options) {
  return pipe::make_pipe_transport(make_pipe(options), options);
}

}  // namespace
}  // namespace thd::detail::libfabric

extern "C" const thd::detail::BackendRegistration* thd_backend_libfabric() {
  static const thd::detail::BackendRegistration registration{
      .name = "libfabric",
      .make_transport = &thd::detail::libfabric::make_transport,
  };
  return &registration;
}
