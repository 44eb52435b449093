// The nccl backend's registration (datachannel/backend_registration.h): nccl
// channels, and the device collectives of other backends' channels.
#include "datachannel/backend_registration.h"
#include "datachannel/nccl/nccl_backend.h"
#include "datachannel/nccl/nccl_collectives.h"

namespace thd::detail::nccl {
namespace {

std::unique_ptr<DeviceCollectives> make_device_collectives(int world_rank, int world_size) {
  return std::make_unique<NcclCollectives>(world_rank, world_size);
}

}  // namespace
}  // namespace thd::detail::nccl

extern "C" const thd::detail::BackendRegistration* thd_backend_nccl() {
  static const thd::detail::BackendRegistration registration{
      .name = "nccl",
      .make_transport = &thd::detail::nccl::make_transport,
      .make_device_collectives = &thd::detail::nccl::make_device_collectives,
  };
  return &registration;
}
