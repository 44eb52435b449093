// The rank side of the datachannel suite: what each process launch_ranks() starts
// measures, together with the others.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "bench/harness.h"

namespace thd::bench::dc {

struct RankSettings {
  std::string backend;  // DataChannel::create's backend; also the figures' prefix
  int rank = -1;
  int world_size = -1;
  uint16_t master_port = 0;  // rank 0's store, on 127.0.0.1
  pid_t parent_pid = -1;     // the launcher: this rank dies with it
  // Started by mpirun (the mpi backend): rank and store come from the mpi://
  // rendezvous; rank, master_port and parent_pid are unused.
  bool from_mpi = false;
  // Rendezvous, the channel's default deadline, and every store wait.
  std::chrono::milliseconds timeout{std::chrono::minutes(1)};
};

// Joins the job (tcp:// rendezvous, then DataChannel::create), runs every figure
// the filter lets through with the other ranks, and on rank 0 writes them to stdout
// as "name value unit" lines at full precision, for the launcher to print. Throws on
// any failure, a wrong result of a collective included.
void run_rank(Context& ctx, const RankSettings& settings);

}  // namespace thd::bench::dc
