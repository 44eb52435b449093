// What a backend gives the registry: the one entry point each backend folder
// defines (docs/backends.md),
//
//   extern "C" const thd::detail::BackendRegistration* thd_backend_<name>();
//
// found with dlsym in the backend's module (libthd_backend_<name>.so) or, for the
// backends compiled into the library, listed in the generated backend_catalog.cpp.
#pragma once

#include <memory>

#include <thd/config.h>
#include <thd/store.h>

#include "datachannel/transport.h"

namespace thd::detail {

class DeviceCollectives;

struct BackendRegistration {
  // THD_VERSION_STRING of the thd the backend was built with: a module built
  // against another thd is refused rather than called through a changed interface.
  const char* thd_version = THD_VERSION_STRING;
  const char* name = nullptr;
  std::shared_ptr<Transport> (*make_transport)(const DataChannelOptions& options) = nullptr;
  // Collectives on device tensors for the channels of other backends (nccl's);
  // nullptr for none.
  std::unique_ptr<DeviceCollectives> (*make_device_collectives)(int world_rank, int world_size) = nullptr;
  // The rendezvous of the init_method scheme the backend declares (RENDEZVOUS in
  // its thd_backend call); nullptr for none.
  RendezvousResult (*rendezvous)(const RendezvousOptions& options) = nullptr;
};

using BackendEntryPoint = const BackendRegistration* (*)();

}  // namespace thd::detail
