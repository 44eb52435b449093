// MasterWorkerOptions::backend resolved: the option, else $THD_BACKEND, else "tcp".
#pragma once

#include <string>

namespace thd::master {

std::string chosen_backend(const std::string& requested);

}  // namespace thd::master
