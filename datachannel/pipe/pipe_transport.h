// thd's Transport over any MessagePipe (mpi, ucx, libfabric), composed of parts
// with one job each (docs/backends.md, "Message-library backends"):
//   TokenProof (token_proof.h)  the peers prove the job's token before any message;
//   Liveness (liveness.h)       heartbeats and the process watch decide who is gone;
//   LostPeers (lost_peers.h)    who is lost, why, and whether by its goodbye;
//   PipeEngine (pipe_engine.h)  MPI matching and the messages' framing over the pipe.
// This class holds the lock they run under, runs the handshake, and drives the
// pipe: a progress thread drives it and sleeps in MessagePipe::sleep() while
// nothing happens; a waiter spins on the pipe for a moment first (latency) and
// then blocks on its request.
//
// The direct path (pipe_transport_direct.cpp): a small blocking send or receive
// of a point-to-point message the library matches itself goes from
// send_now/recv_blocking straight to the pipe (MessagePipe::send_direct,
// recv_direct), under the lock but past the engine's records, match queues and
// shared requests; the receive's op and request live on the waiter's stack
// (direct_recv.h). The engine says when order allows it (PipeEngine::
// direct_send_allowed, direct_recv_allowed); everything else takes the general path.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <thd/store.h>

#include "datachannel/net/auth.h"
#include "datachannel/pipe/direct_recv.h"
#include "datachannel/pipe/engine_lock.h"
#include "datachannel/pipe/liveness.h"
#include "datachannel/pipe/lost_peers.h"
#include "datachannel/pipe/message_pipe.h"
#include "datachannel/pipe/pipe_engine.h"
#include "datachannel/pipe/pipe_tuning.h"
#include "datachannel/pipe/process_watch.h"
#include "datachannel/pipe/token_proof.h"
#include "datachannel/pipe/yield_backoff.h"
#include "datachannel/transport.h"

namespace thd::detail::pipe {

// What the ranks prove to each other before a channel is made: the job's token,
// through HMACs over nonces exchanged in the channel's store (the libraries' own
// connections are not authenticated).
struct PipeAuth {
  net::AuthToken token;
  std::shared_ptr<Store> store;  // the channel's own (prefixed) store
  std::chrono::milliseconds timeout{30000};
  // Who this rank's process is, as published to its peers (process_watch.h):
  // this_process() unless a test stands another process in.
  std::optional<ProcessIdentity> identity = std::nullopt;
};

// A backend's Transport: PipeTransport over its pipe, with the token and timeout
// of `options`, tuned from the environment. What a message-library backend's
// registration line calls.
std::shared_ptr<Transport> make_pipe_transport(std::unique_ptr<MessagePipe> pipe, const DataChannelOptions& options);

class PipeTransport final : public Transport {
 public:
  // Returns once every peer has proved the token (the handshake): AuthError naming
  // a peer whose proof does not verify (this rank's own token differs from the
  // job's, or the peer's does), TimeoutError naming the peers not heard from.
  PipeTransport(std::unique_ptr<MessagePipe> pipe, PipeAuth auth, const PipeTuning& tuning = {});
  // Lets sends finish for up to close_linger, stops the progress thread, fails every
  // pending request with ConnectionError("channel closed"), destroys the pipe.
  ~PipeTransport() override;

  std::string_view name() const noexcept override { return name_; }
  void post_send(std::span<const uint8_t> data, int dst, const Envelope& envelope,
                 const std::shared_ptr<RequestState>& request) override;
  // The direct path (send_direct).
  bool send_now(std::span<const uint8_t> data, int dst, const Envelope& envelope) override {
    return send_direct(data, dst, envelope);
  }
  std::shared_ptr<RequestState> send_blocking(std::span<const uint8_t> data, int dst, const Envelope& envelope,
                                              const RequestMaker& make_request) override;
  void post_recv(std::span<uint8_t> data, int src, const Envelope& envelope,
                 const std::shared_ptr<RequestState>& request) override;
  int recv_blocking(std::span<uint8_t> data, int src, const Envelope& envelope, const RequestSpec& spec) override;
  void cancel(const std::shared_ptr<RequestState>& request, std::exception_ptr why) override;
  bool wait(RequestState& request, net::Deadline until) override;
  // The deadline the request's call left open is fixed at the spin's first clock
  // read, or when it blocks: a wait that ends within the first rounds reads no clock.
  bool wait_own(RequestState& request) override;
  // A blocked waiter of its own, or a collective engine lane asleep: the progress
  // thread serves the pipe meanwhile.
  void begin_external_wait() noexcept override;
  void end_external_wait() noexcept override;
  std::exception_ptr peer_error(int world_rank) const override;
  bool peer_departed(int world_rank) const override;
  HostCollectives* host_collectives() noexcept override { return host_collectives_; }

  // How many blocking sends and receives took the direct path (for tests and
  // diagnostics).
  struct DirectCounts {
    uint64_t sends = 0;
    uint64_t recvs = 0;
  };
  DirectCounts direct_counts() const;

 private:
  // ---- the direct path (pipe_transport_direct.cpp) ----
  // Sends a small message straight to the pipe; false when the direct path does
  // not take it (nothing sent).
  bool send_direct(std::span<const uint8_t> data, int dst, const Envelope& envelope);
  // Posts `recv` straight to the pipe; false when the direct path does not take it
  // (nothing posted).
  bool post_direct(DirectRecv& recv);
  // Waits for a receive post_direct posted, withdrawing it at its deadline or when
  // an interrupt check throws; returns the world rank it came from or throws its error.
  int wait_direct(DirectRecv& recv);
  // wait() until `*until`, or (null) the request's own deadline, fixed at the first
  // clock read.
  // `sole_waiter`: this thread is the request's only waiter, and every finisher
  // of it holds the engine lock (a direct receive's): its own rounds finish it
  // without an atomic handshake (RequestState::finished_by_its_waiter).
  bool spin_then_block(RequestState& request, const net::Deadline* until, bool sole_waiter = false);
  // Takes `recv` back from the pipe and fails it with `why`; a receive the library
  // already matched is waited for, as its bytes land in the caller's memory.
  void withdraw_direct(DirectRecv& recv, std::exception_ptr why);

  void prove_token(const PipeAuth& auth);
  // Drives the pipe until `finished` holds or `until` passes; false on timeout.
  bool drive_locked(std::unique_lock<EngineLock>& lock, net::Deadline until, const std::function<bool()>& finished);
  // drive_locked as the engine's Drive, for a call holding `lock`.
  PipeEngine::Drive driver(std::unique_lock<EngineLock>& lock) {
    return [this, &lock](net::Deadline until, const std::function<bool()>& finished) {
      return drive_locked(lock, until, finished);
    };
  }
  void wake_sleeper() noexcept;

  void progress_loop() noexcept;
  // Carries out what liveness_ decides at `now`: heartbeats out, silent peers
  // lost, peers whose process exited lost (`look_at_processes`: the watch is due a
  // look). Under mu_, from the progress thread.
  void tend_peers(net::Clock::time_point now, bool look_at_processes);

  const std::string name_;
  const PipeTuning tuning_;
  HostCollectives* const host_collectives_;  // the pipe's, or null

  // Which peers proved the token.
  TokenProof proof_;
  // Heartbeats and the process watch, under mu_.
  Liveness liveness_;
  std::vector<std::shared_ptr<const RequestState>> heartbeat_out_;  // by rank: the latest heartbeat
  // Who is lost and why, read from any thread.
  LostPeers lost_peers_;
  mutable EngineLock mu_;  // the engine lock: every engine call and so every pipe call
  PipeEngine engine_;
  // The pipe takes direct sends and receives (MessagePipe::offers_direct), the
  // engine has it match natively, and the tuning allows it (THD_PIPE_DIRECT).
  const bool direct_;
  DirectCounts direct_counts_;  // under mu_

  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<int> blockers_{0};  // waiters blocked on their requests, and external waits
  // Moved by spinning waiters as they start, every few rounds, and as they stop
  // (mark_drive); any change counts.
  std::atomic<uint64_t> drive_marks_{0};
  void mark_drive() noexcept;
  // Gives the core away, as a waiter spinning on a host with more ranks than
  // cores does; `adaptive`: learns from how long it took (yield_backoff.h).
  void yield_core(bool adaptive) noexcept;
  YieldBackoff yield_backoff_{tuning_.yield_switch};
  // The progress thread's own: the mark it last saw, and since when it stands down.
  uint64_t marks_seen_ = 0;
  int64_t stand_down_since_ns_ = 0;
  // The progress thread keeps out of the way while a waiter drives, and for a
  // moment after (the next round trip's waiter comes soon), unless a waiter is
  // blocked. Progress thread only.
  bool stand_down() noexcept;
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  std::thread progress_;
};

}  // namespace thd::detail::pipe
