// Backends by name. Each backend folder registers itself (backend_registration.h);
// the registry knows every backend of the build from the generated catalog
// (backend_catalog.h), and loads a backend's module only when it is asked for.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "datachannel/backend_catalog.h"
#include "datachannel/net/auth.h"
#include "datachannel/transport.h"

namespace thd::detail {

// The registration of backend `name`, its module loaded if it has one. ValueError
// for a name that is not available, saying whether it is unknown, a backend this
// build left out (and the CMake option that builds it), or one whose module is not
// in the search path (naming the folders searched), and listing what is available.
const BackendRegistration& find_backend(const std::string& name);

// The backends a channel can be created with, sorted: those compiled into the
// library and those whose modules lie in the search path (none is loaded).
std::vector<std::string> built_backends();

// What the catalog says of `name`; nullptr for a backend this build does not know
// (a module from elsewhere, found by THD_BACKEND_PATH).
const KnownBackend* known_backend(std::string_view name);

// Why make_device_collectives has none, for an error message: the option that
// builds the backend that would provide them, or where its module was looked for.
std::string missing_device_collectives();

// The backend whose rendezvous init_method `scheme`:// is; nullptr for none.
const KnownBackend* rendezvous_backend(std::string_view scheme);

// The backend whose launcher started this process (one of its LAUNCHER_ENV
// variables is set) and that this build can load; nullptr for none. Reads the
// environment only: nothing is loaded.
const KnownBackend* launching_backend(const net::EnvLookup& env = net::process_env);

}  // namespace thd::detail
