// The processes of one run of the dispatch suite. This process is the master
// (rank 0 of the master-worker job); it starts two copies of this binary:
//   - the worker (rank 1, node 0): joins through env:// (RANK, WORLD_SIZE,
//     MASTER_ADDR, MASTER_PORT, THD_AUTH_TOKEN, as thdrun sets them) and serves
//     until the master shuts down;
//   - the reference peer: the other end of the plain-socket figures. It times its
//     side with the master through a store this process serves, so the reference
//     and the runtime's figures are interleaved repetition by repetition and
//     neither process spins while the other pair measures.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <thd/store.h>

#include "bench/datachannel/process.h"

namespace thd::bench::mw {

// The hidden options that make a thd-bench process one of the children.
inline constexpr const char* kRoleFlag = "--role";
inline constexpr const char* kParentPidFlag = "--parent-pid";
inline constexpr const char* kStorePortFlag = "--store-port";
inline constexpr const char* kWorkerRole = "worker";
inline constexpr const char* kPeerRole = "peer";

class Job {
 public:
  // Serves the store, starts the peer and the worker. `args`: this process's suite
  // arguments (the filter, --quick, ...), passed on to the peer, which must run the
  // same figures. `timeout`: the store's waits and the children's deadlines.
  // `workers`: worker processes (nodes 0..workers-1, ranks 1..workers); `worker_env`:
  // extra environment for them.
  static std::unique_ptr<Job> start(const std::string& suite, const std::vector<std::string>& args,
                                    std::chrono::milliseconds timeout, int workers = 1,
                                    const std::vector<std::string>& worker_env = {});
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  // Kills and reaps whichever child is still running.
  ~Job() = default;

  // What init_master_worker on this process needs.
  std::string init_method() const;
  const std::string& token() const { return token_; }
  // The store this process shares with the reference peer.
  const std::shared_ptr<Store>& store() const { return store_; }

  // Waits up to `timeout` for both children to exit (the worker after
  // thd::shutdown, the peer after its last figure); throws std::runtime_error
  // naming the one that failed or is still running.
  void finish(std::chrono::milliseconds timeout);
  // Throws std::runtime_error when a child has already ended with an error: a
  // wait that would fail anyway, named by the child that caused it.
  void check_children();

 private:
  Job() = default;

  std::string token_;
  uint16_t master_port_ = 0;
  std::shared_ptr<Store> store_;
  // The worker first: it is killed last, after the peer, when both still run.
  std::vector<dc::ChildProcess> workers_;
  std::optional<dc::ChildProcess> peer_;
};


}  // namespace thd::bench::mw
