// The launcher side of the datachannel suite: runs this binary once per rank of a
// local job and hands back what rank 0 prints.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace thd::bench::dc {

// The hidden options that turn a thd-bench process into a rank of the job.
inline constexpr const char* kRankFlag = "--rank";
inline constexpr const char* kWorldSizeFlag = "--world-size";
inline constexpr const char* kMasterPortFlag = "--master-port";
inline constexpr const char* kParentPidFlag = "--parent-pid";

struct LaunchOptions {
  std::string suite;              // the suite's name, argv[1] of every rank
  std::vector<std::string> args;  // the launcher's own arguments, passed on to every rank
  int world_size = 2;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // for the whole job
  // Non-empty: start the ranks as one `mpirun -n world_size` job of this path (the
  // mpi backend); they take their ranks from MPI ("--rank mpi").
  std::string mpirun;
};

// The value of the rank option that says "ask MPI".
inline constexpr const char* kRankFromMpi = "mpi";

// Starts world_size processes of this executable (/proc/self/exe) as ranks
// 0..world_size-1, with `args` plus the hidden rank options: a free loopback port
// for rank 0's store and a fresh random token in THD_AUTH_TOKEN. Rank 0's stdout
// comes back line by line through `on_line`; the other ranks' stdout goes to
// stderr, and every rank's stderr is this process's.
//
// Returns when every rank has exited with 0. Throws std::runtime_error naming the
// rank when one fails (exit code or signal) or the job passes `timeout`; every
// rank still running is killed and reaped first, on every path out.
void launch_ranks(const LaunchOptions& options, const std::function<void(const std::string&)>& on_line);

}  // namespace thd::bench::dc
