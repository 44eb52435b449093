// The shared state behind a thd::Request: written by a backend's progress engine
// (or a collective's executor), read by the threads that test and wait on it.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <thd/tensor.h>

#include "datachannel/net/socket.h"
#include "datachannel/op_label.h"

namespace thd::detail {

class Transport;

// What a point-to-point request is made of: RequestState's fields, and the tensor a
// request kept past its call must hold (DataChannel's calls build one; a blocking
// receive may keep its request on the stack, Transport::recv_blocking).
struct RequestSpec {
  OpLabel op;
  net::Deadline deadline;
  int rank = -1;  // this rank in the world
  bool passive_wait = false;
  std::chrono::microseconds yield_spin{0};
  const Tensor* keep = nullptr;
  // Set for a call that waits for its request before it returns (a blocking
  // receive): the deadline is this much after the wait's first clock read, and
  // `deadline` is unused. A spinning waiter reads the clock first a few rounds in
  // (PipeTransport::wait), so a wait that ends sooner never reads it: a read at
  // the call was a measurable part of a small round trip's setup.
  std::optional<std::chrono::milliseconds> timeout_from_wait = std::nullopt;
};

// Tells lane `lane` (numbered from 1) of the collective engine that a request one
// of its tasks waits for has finished (collective_engine.cpp): its tasks wait
// without a thread of their own. Quick, and callable from any thread.
void collective_lane_request_finished(uint32_t lane) noexcept;

struct RequestState {
  enum Status : int { Pending = 0, Done = 1, Failed = 2 };

  // `op` describes the operation for errors ("recv from rank 1 (tag 3)");
  // `deadline` is the op's own; `engine` is the transport a waiter may drive
  // (nullptr: waiters only block).
  RequestState(OpLabel op, net::Deadline deadline, Transport* engine, int rank)
      : op(std::move(op)), engine(engine), rank(rank), deadline_at_(deadline.time_since_epoch().count()) {}
  // Everything of `spec` but its tensor (the caller decides whether to keep it).
  RequestState(const RequestSpec& spec, Transport* engine)
      : op(spec.op),
        engine(engine),
        rank(spec.rank),
        passive_wait(spec.passive_wait),
        yield_spin(spec.yield_spin),
        timeout_from_wait_(spec.timeout_from_wait.value_or(std::chrono::milliseconds(0))),
        deadline_at_(spec.timeout_from_wait ? kUnfixed : spec.deadline.time_since_epoch().count()) {}

  // The first of complete()/fail() wins and wakes every waiter; later calls are
  // ignored and return false. Both are noexcept: they run on progress threads.
  // Neither takes a lock unless a waiter is blocked: most requests are finished
  // while their waiter spins (or before it waits), and an 8-byte round trip paid
  // two lock/notify pairs for nobody. Blocked waiters sleep on a condition
  // variable shared by a stripe of requests (a request is made per message, and a
  // mutex and condition variable of its own were a measurable part of one).
  bool complete(int source_world_rank, size_t nbytes) noexcept;
  bool fail(std::exception_ptr why) noexcept;

  int status() const noexcept {
    const int s = static_cast<int>(state_.load(std::memory_order_acquire) & kStatusMask);
    return s == kClaimed ? Pending : s;
  }
  bool finished() const noexcept { return status() != Pending; }

  // Blocks (without driving any engine) until finished or `until`; true if finished.
  bool block_until(net::Deadline until);

  // The op's deadline. One counted from the wait (RequestSpec::timeout_from_wait)
  // is fixed by the first call: from `now`, a clock read its caller just made, or
  // else from the coarse clock (net::coarse_deadline_after: at most a few ms
  // later, as a deadline fixed when the request is made); every later call
  // returns the same.
  net::Deadline deadline() const noexcept {
    const net::Clock::rep at = deadline_at_.load(std::memory_order_relaxed);
    return at != kUnfixed ? net::Deadline(net::Clock::duration(at)) : fix_deadline_coarsely();
  }
  net::Deadline deadline(net::Deadline now) const noexcept {
    const net::Clock::rep at = deadline_at_.load(std::memory_order_relaxed);
    return at != kUnfixed ? net::Deadline(net::Clock::duration(at)) : fix_deadline(now);
  }
  // False while a deadline counted from the wait has not been fixed yet.
  bool deadline_fixed() const noexcept { return deadline_at_.load(std::memory_order_relaxed) != kUnfixed; }

  const OpLabel op;
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
  // A receive of any length (DataChannel::irecv_message) takes a message of bytes
  // of up to `length_limit` bytes into `message`, which the transport makes once
  // the message matched (accept_match, matching.h). Set before it is posted.
  bool any_length = false;
  size_t length_limit = 0;
  std::unique_ptr<uint8_t[]> message;
  bool message_taken = false;  // Request::take_message moved it out
  // Whatever must outlive the transfer: a point-to-point request's tensor's storage
  // (a copy of the tensor's handle, its shape and strides, was two allocations per
  // message and the vector a third), a collective's tensors and staging buffers.
  Storage kept_storage;
  std::vector<Tensor> keepalive;
  // Whether the request holds the memory its transfer uses (else the caller's
  // memory is borrowed until the request finishes).
  bool keeps_memory() const noexcept { return kept_storage != nullptr || !keepalive.empty(); }

 private:
  // One word: the status, plus kClaimed while a finisher writes the fields, plus
  // kBlockedBit once a waiter sleeps. Finishing costs one compare-and-swap and a
  // plain store: a waiter sets the bit only on a Pending request, so once the
  // finisher's claim succeeded nobody changes the word but the finisher.
  static constexpr uint32_t kStatusMask = 3;
  static constexpr uint32_t kClaimed = 3;
  static constexpr uint32_t kBlockedBit = 4;
  // Claims the right to finish the request (the first caller wins), so the fields
  // are written once, before the status publishes them. Returns whether a waiter
  // is blocked, or nullopt when another finisher came first.
  std::optional<bool> claim() noexcept;
  // Publishes `status` and wakes blocked waiters, if any.
  void publish(int status, bool waiters) noexcept;

  static constexpr net::Clock::rep kUnfixed = std::numeric_limits<net::Clock::rep>::min();
  net::Deadline fix_deadline(net::Deadline now) const noexcept;
  net::Deadline fix_deadline_coarsely() const noexcept;
  net::Deadline fix_deadline_at(net::Deadline at) const noexcept;
  const std::chrono::milliseconds timeout_from_wait_{0};
  // The deadline's ticks, or kUnfixed. Atomic: any thread waiting on the request
  // may fix it.
  mutable std::atomic<net::Clock::rep> deadline_at_;

  std::atomic<uint32_t> state_{Pending};

 public:
  // Set before the request is posted: the collective engine's lane (from 1) told
  // once the request finishes; 0: none. After state_, in what was its padding:
  // every request pays for it one load when it finishes, and no bytes.
  uint32_t on_finish = 0;
  // Set by the request's only waiter while it drives its transport under the lock
  // that every finisher of the request holds (a blocking receive on PipeTransport's
  // direct path, whose request lives on the waiter's stack): complete() then runs
  // on that thread, which nobody else can finish the request from or be blocked
  // on it meanwhile, and publishes with a plain store rather than a
  // compare-and-swap on the way from the message's arrival to the answer.
  bool finished_by_its_waiter = false;
};

// Waits until `s` finishes or `until` passes; true if it finished. With an interrupt
// check installed (thd/interrupt.h) the wait runs in periods with the check between
// them; a check that throws ends the wait with its exception, `s` still pending.
bool wait_until_interruptibly(RequestState& s, net::Deadline until);
// The same until the request's own deadline, which a transport's waiter may fix
// only when it first reads the clock (Transport::wait_own, RequestSpec::timeout_from_wait).
bool wait_own_interruptibly(RequestState& s);

}  // namespace thd::detail
