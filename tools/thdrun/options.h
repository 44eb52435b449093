// thdrun's command line: what to run, how many times, and with which rendezvous
// address. Parsing only; launch.h acts on the result.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace thd::launch {

// More local processes than this is a typo (-n 1000000), not a job.
inline constexpr int kMaxLocalProcesses = 1024;

// What a rank's failure (non-zero exit or a signal) does to the job (docs/thdrun.md).
enum class OnRankFailure {
  Auto,           // MasterDecides in a master-worker job, KillAll otherwise
  KillAll,        // the other ranks are stopped; the job's status is the failure's
  MasterDecides,  // a worker's death is the master's (rank 0's) to handle; the job
                  // ends when the master exits, with the master's status
};

struct LaunchOptions {
  int nproc = 0;                                  // -n: processes to start
  std::string master_addr = "127.0.0.1";          // --master-addr
  std::optional<uint16_t> master_port;            // --master-port; unset: a free one
  std::chrono::milliseconds kill_grace{5000};     // --timeout-kill: SIGTERM -> SIGKILL
  bool tag_output = false;                        // --tag-output
  std::optional<std::string> backend;             // --backend: THD_BACKEND of every process
  OnRankFailure on_rank_failure = OnRankFailure::Auto;  // --on-rank-failure
  // --pool: keep -n thd-worker processes serving masters (docs/worker_pool.md);
  // the command, if any, runs as a master of the pool and the pool stops after it.
  bool pool = false;
  std::string listen_host = "127.0.0.1";          // --listen HOST:PORT: the pool's store
  uint16_t listen_port = 0;                       // 0: a free port, printed at start
  std::vector<std::string> command;               // the program and its arguments
};

enum class Action { Run, Help, Version };

struct ParsedArgs {
  Action action = Action::Run;
  LaunchOptions options;  // meaningful for Action::Run only
};

// Parses the arguments after argv[0]. Options come first; the first argument that
// is not an option (or everything after "--") is the program, and the rest are its
// arguments, passed through untouched. Throws thd::ValueError naming the argument
// that is wrong and why.
ParsedArgs parse_args(std::span<const std::string> args);

// "usage: thdrun -n N [options] program [args...]"
std::string usage_line();
// The full --help text.
std::string help_text();
// "thdrun (thd) 0.1.0"
std::string version_text();

}  // namespace thd::launch
