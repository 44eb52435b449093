// thdrun --pool: hosts a worker pool's store and keeps its thd-worker processes
// alive (docs/worker_pool.md).
#pragma once

#include <string>

#include "tools/thdrun/options.h"

namespace thd::launch {

// Starts the pool's TCPStore server on options.listen_host/listen_port, then
// options.nproc thd-worker processes (nodes 0..N-1), and supervises them
// (pool_supervisor.h). Without a command it prints where the pool is and serves
// until SIGINT/SIGTERM; with one, it runs the command as the pool's master once
// the pool is ready (THD_POOL_URL tells it where) and stops the pool when it exits.
// Returns thdrun's exit status. Throws ConnectionError when the address cannot be
// bound, ExecError when thd-worker or the command cannot be run.
int run_pool(const LaunchOptions& options);

// The thd-worker thdrun starts: the one next to the running thdrun binary (the
// build tree's bin/, or the install's), else "thd-worker" looked up in PATH.
std::string worker_program();

}  // namespace thd::launch
