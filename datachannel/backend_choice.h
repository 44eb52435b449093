// Which DataChannel backend a job uses when the program names none: the
// launcher's choice (thdrun --backend exports THD_BACKEND), else tcp. Both
// init_process_group and init_master_worker resolve their backend here, so one
// launch line picks the backend of either mode.
#pragma once

#include <string>

namespace thd::detail {

// `requested` when it is not empty, else $THD_BACKEND when set and not empty,
// else "tcp".
std::string chosen_backend(const std::string& requested);

}  // namespace thd::detail
