// The backends' loadable modules, libthd_backend_<name>.so: where the registry
// looks for them and how it loads one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "datachannel/backend_registration.h"
#include "datachannel/net/auth.h"

namespace thd::detail {

// The folders searched, in order: those of THD_BACKEND_PATH (':'-separated), then
// the folder libthd_datachannel was loaded from (lib/ of the build or install
// tree, where the build puts the modules).
std::vector<std::string> module_search_path(const net::EnvLookup& env = net::process_env);

std::string module_file_name(std::string_view backend);

// The path of `backend`'s module in the search path; "" when there is none.
std::string find_module(std::string_view backend, const net::EnvLookup& env = net::process_env);

// The backends whose modules lie in the search path, without loading them.
std::vector<std::string> modules_on_path(const net::EnvLookup& env = net::process_env);

// Loads the module at `path` (once per process) and returns its registration.
// thd::Error naming the path when it does not load (dlopen's reason: a library it
// needs is missing), has no entry point for `backend`, or was built for another
// version of thd.
const BackendRegistration& load_module(const std::string& path, std::string_view backend);

}  // namespace thd::detail
