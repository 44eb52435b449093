// The table backends.cpp fills and registry.cpp reads.
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include <thd/store.h>

#include "datachannel/device_collectives.h"
#include "datachannel/net/auth.h"
#include "datachannel/transport.h"

namespace thd::detail {

struct BackendEntry {
  std::string_view name;
  TransportFactory factory;
};
const std::vector<BackendEntry>& backend_table();

struct OptionalBackend {
  std::string_view name;
  std::string_view option;    // the CMake option that builds it
  std::string_view requires_;  // what it needs installed
};
const std::vector<OptionalBackend>& optional_backends();

// A rendezvous a backend's launcher makes possible (mpi://): init_method scheme ->
// how to run it, and whether this process was started by that launcher (then env://
// without MASTER_ADDR uses it).
struct RendezvousScheme {
  std::string_view scheme;
  std::function<RendezvousResult(const RendezvousOptions&)> run;
  std::function<bool()> launched_here;
};
const std::vector<RendezvousScheme>& rendezvous_schemes();

// The library this build runs collectives on device tensors with, for a channel
// whose backend has none of its own (NCCL when built with THD_WITH_NCCL);
// nullptr when there is none.
std::unique_ptr<DeviceCollectives> make_device_collectives(int world_rank, int world_size);

}  // namespace thd::detail
