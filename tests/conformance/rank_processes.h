// Ranks as real forked processes: the realistic harness, for the cases threads
// cannot show (a rank that dies, a rank's listening ports, separate address
// spaces). The parent forks every rank before it creates any thread; the children
// report through their exit codes (and print what failed to stderr), and are
// always killed and reaped (test::Children).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <thd/datachannel.h>
#include <thd/store.h>

#include "datachannel/test_util.h"

namespace thd::conformance {

// A pipe between the parent and forked ranks, for small fixed-size messages
// (writes of at most PIPE_BUF bytes are atomic, so several readers may share it).
// Every read has a deadline.
class Pipe {
 public:
  Pipe();
  ~Pipe();
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;

  void write_u16(uint16_t value);
  uint16_t read_u16(std::chrono::milliseconds timeout);

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
};

// What a rank process runs: returns its exit code. A check that throws is
// printed (with the rank) and exits 1.
using RankMain = std::function<void(int rank, const std::shared_ptr<Store>& store)>;

// Forks n ranks joined over a TCPStore hosted by rank 0 on a port it picks (port
// 0); the port reaches the other ranks, and the parent when it asks, over a pipe.
class StoreWorld {
 public:
  StoreWorld(int n, RankMain body, std::chrono::milliseconds timeout = std::chrono::milliseconds(15000));
  // The store's port, for the parent (blocks until rank 0 has bound it).
  uint16_t store_port(std::chrono::milliseconds timeout);
  pid_t pid(int rank) const { return pids_.at(static_cast<size_t>(rank)); }
  // Exit codes in rank order (128 + signal for a killed rank, -1 for one still
  // running at the deadline, which is then killed).
  std::vector<int> wait_all(std::chrono::milliseconds timeout);

 private:
  Pipe port_pipe_;
  test::Children children_;
  std::vector<pid_t> pids_;
  bool parent_has_port_ = false;
  uint16_t port_ = 0;
};

// Forks n ranks that meet through thd::rendezvous("tcp://127.0.0.1:PORT").
class RendezvousWorld {
 public:
  RendezvousWorld(int n, RankMain body, std::chrono::milliseconds timeout = std::chrono::milliseconds(15000));
  std::vector<int> wait_all(std::chrono::milliseconds timeout);

 private:
  test::Children children_;
};

// The world channel of a rank process.
std::shared_ptr<DataChannel> make_channel(const std::string& backend, const std::shared_ptr<Store>& store, int rank,
                                          int world_size,
                                          std::chrono::milliseconds timeout = std::chrono::milliseconds(15000));

// The TCP ports process `pid` listens on (from /proc: its socket inodes matched
// against /proc/net/tcp{,6} entries in LISTEN state).
std::vector<uint16_t> listening_ports(pid_t pid);

// A gtest-readable account of exit codes: "rank 0: 0, rank 1: 137 (SIGKILL)".
std::string describe_exit_codes(const std::vector<int>& codes);

}  // namespace thd::conformance
