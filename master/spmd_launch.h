// Sessions in an SPMD launch (mpirun, srun: every rank runs the program, and in
// master-worker mode ranks > 0 serve as workers and exit at shutdown): once the
// master's session of such a launch has started, the launch has no workers for
// another one after shutdown, and a new init_master_worker says so at once
// instead of waiting out its timeout for ranks that are gone.
#pragma once

#include <thd/store.h>

namespace thd::master {

// Throws ValueError when a session of this process joined through `rv`'s launcher
// has started before (and, the caller has checked, was shut down since).
void check_launch_has_workers(const RendezvousOptions& rv);

// Records that the master's session joined through `rv` has started.
void note_session_started(const RendezvousOptions& rv);

}  // namespace thd::master
