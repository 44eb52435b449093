// The shared state behind a thd::Request: written by a backend's progress engine
// (or a collective's executor), read by the threads that test and wait on it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <thd/tensor.h>

#include "datachannel/net/socket.h"
#include "datachannel/op_label.h"

namespace thd::detail {

class Transport;

struct RequestState {
  enum Status : int { Pending = 0, Done = 1, Failed = 2 };

  // `op` describes the operation for errors ("recv from rank 1 (tag 3)");
  // `deadline` is the op's own; `engine` is the transport a waiter may drive
  // (nullptr: waiters only block).
  RequestState(OpLabel op, net::Deadline deadline, Transport* engine, int rank)
      : op(std::move(op)), deadline(deadline), engine(engine), rank(rank) {}

  // The first of complete()/fail() wins and wakes every waiter; later calls are
  // ignored and return false. Both are noexcept: they run on progress threads.
  bool complete(int source_world_rank, size_t nbytes) noexcept;
  bool fail(std::exception_ptr why) noexcept;

  int status() const noexcept { return status_.load(std::memory_order_acquire); }
  bool finished() const noexcept { return status() != Pending; }

  // Blocks (without driving any engine) until finished or `until`; true if finished.
  bool block_until(net::Deadline until);

  const OpLabel op;
  const net::Deadline deadline;
  Transport* const engine;
  const int rank;  // this rank in the world, for error context

  // Set before the status is published; read after finished() is seen true.
  int source = -1;      // world rank a receive matched
  size_t bytes = 0;     // bytes moved
  std::exception_ptr error;

  // Group ranks of the channel that made the request, so source() can answer in
  // group numbering. Null for world-group requests.
  std::shared_ptr<const std::vector<int>> group_ranks;
  // Set before the request is posted: its waiters only block (P2POptions::passive_wait).
  bool passive_wait = false;
  // Set before the request is posted: how long its waiters drive progress, yielding
  // their core between polls, before the backend's own waiting (P2POptions::yield_spin).
  std::chrono::microseconds yield_spin{0};
  // Whatever must outlive the transfer (the tensors, staging buffers).
  std::vector<Tensor> keepalive;

 private:
  std::atomic<int> status_{Pending};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace thd::detail
