// The backends this build knows, as cmake/ThdBackend.cmake generates them into
// backend_catalog.cpp from the backend folders: what the registry can say about a
// backend without loading it.
#pragma once

#include <string_view>
#include <vector>

#include "datachannel/backend_registration.h"

namespace thd::detail {

struct KnownBackend {
  std::string_view name;
  std::string_view option;     // the CMake option that builds it; "" for a built-in one
  std::string_view requires_;  // what it needs installed
  bool built;                  // this build has it (in the library or as its module)
  bool in_library;             // compiled into thd_datachannel: no module to load
  bool device_collectives;     // it runs device collectives for other backends' channels
  std::string_view rendezvous_scheme;  // init_method scheme it serves ("mpi"), "" for none
  std::string_view launcher;           // the launcher of that rendezvous ("mpirun")
  std::vector<std::string_view> launcher_env;  // set in the processes that launcher starts
};

const std::vector<KnownBackend>& known_backends();

// The entry points of the backends compiled into the library.
const std::vector<BackendEntryPoint>& linked_backends();

}  // namespace thd::detail
