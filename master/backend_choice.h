// MasterWorkerOptions::backend resolved: the option, else $THD_BACKEND, else "tcp"
// (the rule init_process_group follows too; datachannel/backend_choice.h).
#pragma once

#include "datachannel/backend_choice.h"

namespace thd::master {

using detail::chosen_backend;

}  // namespace thd::master
