#include "datachannel/registry.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "datachannel/backends.h"
#include "datachannel/check.h"

namespace thd::detail {

std::vector<std::string> built_backends() {
  std::vector<std::string> names;
  for (const auto& entry : backend_table()) names.emplace_back(entry.name);
  std::sort(names.begin(), names.end());
  return names;
}

const TransportFactory& find_backend(const std::string& name) {
  for (const auto& entry : backend_table()) {
    if (entry.name == name) return entry.factory;
  }
  const auto available = built_backends();
  for (const auto& optional : optional_backends()) {
    if (optional.name == name) {
      THD_THROW(ValueError, "DataChannel::create",
                "backend '{}' is not built into this thd: configure with -D{}=ON with {} installed; "
                "available backends: {}",
                name, optional.option, optional.requires_, fmt::join(available, ", "));
    }
  }
  THD_THROW(ValueError, "DataChannel::create", "unknown backend '{}'; available backends: {}", name,
            fmt::join(available, ", "));
}

}  // namespace thd::detail
