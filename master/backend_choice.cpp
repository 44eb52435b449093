// The backend named among a program's arguments (thd::backend_from_args).
#include <cstring>
#include <string>

#include <thd/distributed.h>

namespace thd {

std::string backend_from_args(int argc, const char* const* argv) {
  for (int i = 1; i < argc && argv[i] != nullptr; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "--backend") == 0 && i + 1 < argc && argv[i + 1] != nullptr) return argv[i + 1];
    if (std::strncmp(arg, "--backend=", 10) == 0) return arg + 10;
  }
  return "";
}

}  // namespace thd
