#include "datachannel/registry.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "datachannel/backend_modules.h"
#include "datachannel/backends.h"
#include "datachannel/check.h"

namespace thd::detail {
namespace {

constexpr const char* kOp = "DataChannel::create";

const BackendRegistration* linked_registration(std::string_view name) {
  for (BackendEntryPoint entry : linked_backends()) {
    const BackendRegistration* registration = entry();
    if (registration->name == name) return registration;
  }
  return nullptr;
}

}  // namespace

const KnownBackend* known_backend(std::string_view name) {
  for (const auto& known : known_backends()) {
    if (known.name == name) return &known;
  }
  return nullptr;
}

std::vector<std::string> built_backends() {
  std::vector<std::string> names;
  for (BackendEntryPoint entry : linked_backends()) names.emplace_back(entry()->name);
  for (auto& name : modules_on_path()) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

const BackendRegistration& find_backend(const std::string& name) {
  if (const BackendRegistration* linked = linked_registration(name)) return *linked;
  const KnownBackend* known = known_backend(name);
  if (known != nullptr && !known->built) {
    THD_THROW(ValueError, kOp,
              "backend '{}' is not built into this thd: configure with -D{}=ON with {} installed; "
              "available backends: {}",
              name, known->option, known->requires_, fmt::join(built_backends(), ", "));
  }
  // A module is named after its backend: anything else cannot name a file.
  const bool plain_name = !name.empty() && name.find_first_of("/\\.:") == std::string::npos;
  if (plain_name) {
    if (const std::string path = find_module(name); !path.empty()) return load_module(path, name);
  }
  if (known != nullptr) {
    THD_THROW(ValueError, kOp,
              "backend '{}' is built as the module {}, which is in none of {} (set THD_BACKEND_PATH to the folder "
              "that holds it; -D{}=ON builds it)",
              name, module_file_name(name), fmt::join(module_search_path(), ", "), known->option);
  }
  THD_THROW(ValueError, kOp, "unknown backend '{}'; available backends: {} (modules searched for in: {})", name,
            fmt::join(built_backends(), ", "), fmt::join(module_search_path(), ", "));
}

const KnownBackend* rendezvous_backend(std::string_view scheme) {
  for (const auto& known : known_backends()) {
    if (!known.rendezvous_scheme.empty() && known.rendezvous_scheme == scheme) return &known;
  }
  return nullptr;
}

const KnownBackend* launching_backend(const net::EnvLookup& env) {
  for (const auto& known : known_backends()) {
    if (known.rendezvous_scheme.empty() || !known.built) continue;
    const bool launched = std::any_of(known.launcher_env.begin(), known.launcher_env.end(), [&](std::string_view var) {
      auto value = env(std::string(var).c_str());
      return value && !value->empty();
    });
    if (launched && (known.in_library || !find_module(known.name).empty())) return &known;
  }
  return nullptr;
}

std::string missing_device_collectives() {
  for (const auto& known : known_backends()) {
    if (!known.device_collectives) continue;
    if (!known.built) {
      return fmt::format("this thd was built without it: configure with -D{}=ON with {} installed", known.option,
                         known.requires_);
    }
    if (!known.in_library && find_module(known.name).empty()) {
      return fmt::format("its backend's module {} is in none of {} (set THD_BACKEND_PATH to the folder that holds it)",
                         module_file_name(known.name), fmt::join(module_search_path(), ", "));
    }
  }
  return "this thd was built without it";
}

std::unique_ptr<DeviceCollectives> make_device_collectives(int world_rank, int world_size) {
  for (const auto& known : known_backends()) {
    if (!known.device_collectives || !known.built) continue;
    if (!known.in_library && find_module(known.name).empty()) continue;
    const BackendRegistration& registration = find_backend(std::string(known.name));
    if (registration.make_device_collectives != nullptr) {
      return registration.make_device_collectives(world_rank, world_size);
    }
  }
  return nullptr;
}

}  // namespace thd::detail
