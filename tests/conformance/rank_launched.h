// Ranks as the processes an MPI launcher started (the mpi backend): each process
// runs its own rank's body, and the ranks share the store of an mpi:// rendezvous.
// ctest runs these cases through mpirun, once per world size (conformance.mpi.*);
// a case whose world is another size does nothing in that run.
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "rank_threads.h"

namespace thd::conformance {

// This process's rank and the launch's size, from the launcher's environment
// (OMPI_COMM_WORLD_*, PMI_*); -1 when no launcher started it.
int launched_rank();
int launched_size();

// run_world_collect for a launched backend: every rank's exception, this one's as
// thrown and the others' rebuilt (same thd error class, same text) from what they
// published in the store. All nullptr when n is not the launch's size.
std::vector<std::exception_ptr> run_launched_world(const std::string& backend, int n,
                                                   const std::function<void(RankEnv&)>& body,
                                                   const WorldOptions& options);

// Every rank's outcome of one step, for checks that compare the ranks' errors:
// each rank publishes `mine` under `name` in the world's store and reads the
// others' (rebuilt as in run_launched_world). Works in both harnesses.
std::vector<std::exception_ptr> share_outcomes(RankEnv& env, const std::string& name, std::exception_ptr mine);

}  // namespace thd::conformance
