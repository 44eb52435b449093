// The MPI reference of the all_reduce figures: bench/mpi/allreduce_ref.c, built when
// CMake finds MPI and mpirun, run under Open MPI's mpirun over TCP on loopback.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace thd::bench::dc {

// Whether this build has the reference program (Open MPI only) and an mpirun to run it.
bool mpi_reference_built();

struct MpiAllreduceRun {
  std::string figure_name;  // the line the program prints: "<name> <value> GB/s"
  int world_size = 4;
  int64_t bytes = int64_t{64} << 20;
  int reps = 5;
  double rep_seconds = 0.2;
  std::chrono::milliseconds timeout{std::chrono::minutes(2)};
  // Open MPI's shared-memory transport (btl vader) instead of TCP on loopback: the
  // reference of the backends that use shared memory (mpi, ucx).
  bool shared_memory = false;
};

// Whether an mpirun (of any MPI) was found at build time, and its path.
bool mpirun_built();
std::string mpirun_path();

// Runs `mpirun -n N --oversubscribe --mca btl tcp,self --mca pml ob1
// --mca btl_tcp_if_include lo <program> ...` and returns the bus bandwidth it
// prints, in GB/s. Throws std::runtime_error with mpirun's exit status when it
// fails, prints no such line, or runs past `timeout` (it and its ranks are then
// killed). As root, mpirun is allowed to run through its environment.
double run_mpi_allreduce(const MpiAllreduceRun& run);

}  // namespace thd::bench::dc
