// What a job's launch chose, for init_process_group and init_master_worker alike:
// the DataChannel backend when the program names none (the launcher's choice:
// thdrun --backend exports THD_BACKEND; else tcp), so one launch line picks the
// backend of either mode, and the launcher the ranks come from.
#pragma once

#include <string>
#include <string_view>

#include <thd/store.h>

#include "datachannel/net/auth.h"

namespace thd::detail {

// `requested` when it is not empty, else $THD_BACKEND when set and not empty,
// else "tcp".
std::string chosen_backend(const std::string& requested);

// The launcher whose processes a rendezvous with `options` takes its ranks from,
// when it does: "mpirun" (mpi://, or env:// in a process an MPI launcher started
// with no MASTER_ADDR), "srun" (env:// with Slurm's task rank and no RANK); empty
// otherwise (thdrun's env://, tcp://, file://). The ranks of such a launch are
// fixed at launch: once they exit, no rendezvous of this process meets them again.
std::string_view rendezvous_launcher(const RendezvousOptions& options, const net::EnvLookup& env = net::process_env);

}  // namespace thd::detail
