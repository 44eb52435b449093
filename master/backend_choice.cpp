// Which DataChannel backend a master-worker job uses: the program's choice, else
// the launcher's (thdrun --backend exports THD_BACKEND), else tcp.
#include <cstdlib>
#include <cstring>
#include <string>

#include <thd/distributed.h>

#include "master/backend_choice.h"

namespace thd {

std::string backend_from_args(int argc, const char* const* argv) {
  for (int i = 1; i < argc && argv[i] != nullptr; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "--backend") == 0 && i + 1 < argc && argv[i + 1] != nullptr) return argv[i + 1];
    if (std::strncmp(arg, "--backend=", 10) == 0) return arg + 10;
  }
  return "";
}

namespace master {

std::string chosen_backend(const std::string& requested) {
  if (!requested.empty()) return requested;
  const char* env = std::getenv("THD_BACKEND");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string("tcp");
}

}  // namespace master
}  // namespace thd
