// The table backends.cpp fills and registry.cpp reads.
#pragma once

#include <string_view>
#include <vector>

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

}  // namespace thd::detail
