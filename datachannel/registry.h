// Backends by name. Each backend folder provides one factory; backends.cpp lists
// them, one line each, under the option that builds them.
#pragma once

#include <string>
#include <vector>

#include "datachannel/transport.h"

namespace thd::detail {

// The factory of a built backend. ValueError for any other name, saying whether
// it is a known backend this build left out (and how to build it) or an unknown
// name, and listing what is available.
const TransportFactory& find_backend(const std::string& name);
std::vector<std::string> built_backends();

}  // namespace thd::detail
