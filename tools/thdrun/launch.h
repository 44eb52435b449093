// One local job: the token, the rendezvous address, N ranks started and supervised.
#pragma once

#include "tools/thdrun/options.h"

namespace thd::launch {

// Starts options.command as options.nproc ranks of one job on this host and
// supervises them (supervisor.h) until all have exited; returns the job's exit
// status. Throws ExecError when the program cannot be run (ranks already started
// are killed first), thd::Error when the launcher itself cannot go on. The token
// directory is gone when this returns or throws.
int run_local_job(const LaunchOptions& options);

// Opens /dev/null on any of descriptors 0, 1, 2 that is closed, so that no pipe or
// file the launcher opens later lands there and is mistaken for stdio.
void ensure_standard_fds() noexcept;

}  // namespace thd::launch
