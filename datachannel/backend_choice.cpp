// The backend a job uses when the program names none (datachannel/backend_choice.h).
#include <cstdlib>
#include <string>

#include "datachannel/backend_choice.h"

namespace thd::detail {

std::string chosen_backend(const std::string& requested) {
  if (!requested.empty()) return requested;
  const char* env = std::getenv("THD_BACKEND");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string("tcp");
}

}  // namespace thd::detail
