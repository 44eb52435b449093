// The toy backend: tcp's transport under another name, registered from a module
// of its own.
#include "datachannel/backend_registration.h"
#include "datachannel/tcp/tcp_transport.h"

extern "C" const thd::detail::BackendRegistration* thd_backend_toy() {
  static const thd::detail::BackendRegistration registration{
      .name = "toy",
      .make_transport = &thd::detail::tcp::make_transport,
  };
  return &registration;
}
