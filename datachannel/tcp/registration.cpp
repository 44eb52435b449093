// The tcp backend's registration (datachannel/backend_registration.h).
#include "datachannel/backend_registration.h"
#include "datachannel/tcp/tcp_transport.h"

extern "C" const thd::detail::BackendRegistration* thd_backend_tcp() {
  static const thd::detail::BackendRegistration registration{
      .name = "tcp",
      .make_transport = &thd::detail::tcp::make_transport,
  };
  return &registration;
}
