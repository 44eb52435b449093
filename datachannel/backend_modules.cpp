#include "datachannel/backend_modules.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "datachannel/check.h"
#include "datachannel/library_signal_handlers.h"

namespace thd::detail {
namespace {

constexpr const char* kOp = "DataChannel::create";
constexpr std::string_view kPrefix = "libthd_backend_";
constexpr std::string_view kSuffix = ".so";

std::string own_folder() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&module_search_path), &info) == 0 || info.dli_fname == nullptr) return "";
  std::error_code ec;
  // A static build's "library" is the program itself: its folder (bin/) holds no
  // modules, and looking there is harmless.
  const auto path = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? std::filesystem::path(info.dli_fname).parent_path().string() : path.parent_path().string();
}

bool is_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

}  // namespace

std::vector<std::string> module_search_path(const net::EnvLookup& env) {
  std::vector<std::string> folders;
  if (auto list = env("THD_BACKEND_PATH"); list && !list->empty()) {
    size_t start = 0;
    while (start <= list->size()) {
      const size_t end = std::min(list->find(':', start), list->size());
      if (end > start) folders.push_back(list->substr(start, end - start));
      start = end + 1;
    }
  }
  static const std::string own = own_folder();
  if (!own.empty()) folders.push_back(own);
  return folders;
}

std::string module_file_name(std::string_view backend) { return fmt::format("{}{}{}", kPrefix, backend, kSuffix); }

std::string find_module(std::string_view backend, const net::EnvLookup& env) {
  for (const auto& folder : module_search_path(env)) {
    std::string path = (std::filesystem::path(folder) / module_file_name(backend)).string();
    if (is_file(path)) return path;
  }
  return "";
}

std::vector<std::string> modules_on_path(const net::EnvLookup& env) {
  std::set<std::string> names;
  for (const auto& folder : module_search_path(env)) {
    std::error_code ec;
    for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string file = it->path().filename().string();
      if (file.size() <= kPrefix.size() + kSuffix.size() || !file.starts_with(kPrefix) || !file.ends_with(kSuffix)) {
        continue;
      }
      if (!is_file(it->path().string())) continue;
      names.insert(file.substr(kPrefix.size(), file.size() - kPrefix.size() - kSuffix.size()));
    }
  }
  return {names.begin(), names.end()};
}

const BackendRegistration& load_module(const std::string& path, std::string_view backend) {
  static std::mutex mu;
  static std::map<std::string, const BackendRegistration*> loaded;
  std::lock_guard lock(mu);
  if (auto it = loaded.find(path); it != loaded.end()) return *it->second;
  // RTLD_LOCAL: a module's symbols (and those of the libraries it links) stay its
  // own; RTLD_NOW: a missing symbol fails here, not in the middle of a collective.
  // Never unloaded: its transports and the threads they start live until exit.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    THD_THROW(Error, kOp, "backend '{}': its module {} does not load: {}", backend, path,
              why != nullptr ? why : "unknown dlopen error");
  }
  restore_library_signal_handlers();
  const std::string symbol = fmt::format("thd_backend_{}", backend);
  auto* entry = reinterpret_cast<BackendEntryPoint>(::dlsym(handle, symbol.c_str()));
  THD_CHECK(entry != nullptr, Error, kOp, "backend '{}': its module {} has no entry point {}()", backend, path,
            symbol);
  const BackendRegistration* registration = entry();
  THD_CHECK(registration != nullptr && registration->name != nullptr && registration->name == backend, Error, kOp,
            "backend '{}': the entry point {}() of {} registers another backend ('{}')", backend, symbol, path,
            registration != nullptr && registration->name != nullptr ? registration->name : "");
  THD_CHECK(std::strcmp(registration->thd_version, THD_VERSION_STRING) == 0, Error, kOp,
            "backend '{}': its module {} was built for thd {}, this is thd {}", backend, path,
            registration->thd_version, THD_VERSION_STRING);
  THD_CHECK(registration->make_transport != nullptr, Error, kOp, "backend '{}': its module {} makes no transport",
            backend, path);
  loaded.emplace(path, registration);
  return *registration;
}

}  // namespace thd::detail
