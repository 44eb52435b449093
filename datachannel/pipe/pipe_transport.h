// thd's Transport over any MessagePipe (mpi, ucx, libfabric): MPI matching on
// (context, tag), kind and size checks before a payload byte lands, unexpected
// messages, self-sends, cancel and deadlines, written once (docs/backends.md,
// "Message-library backends").
//
// Each message is one control message on the pipe's control tag: the tcp backend's
// 48-byte frame header (datachannel/wire.h), then, for payloads of at most inline_bytes, the
// payload itself (kind Message). A larger payload is announced instead (kind
// ReadyToSend, its rendezvous id the pipe tag that carries it) and sent at once on
// that tag, a sequence number per destination; the receiver posts the pipe receive
// for it straight into the matched receive's memory, so the library's own
// rendezvous moves it without a copy. Control messages from one peer arrive in send
// order (the pipe's ordering per (peer, tag)), which gives MPI's non-overtaking rule.
//
// Threading: one engine lock guards the match queues and every pipe call. The pipe
// reports completions through PipeOp::done() while the lock is held; done() only
// queues them and settle() handles them afterwards, so a completion never re-enters
// the engine. A progress thread drives the pipe and sleeps in MessagePipe::sleep()
// while nothing happens; a waiter spins on the pipe for a moment first (latency) and
// then blocks on its request.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <thd/store.h>

#include "datachannel/net/auth.h"
#include "datachannel/pipe/liveness.h"
#include "datachannel/pipe/lost_peers.h"
#include "datachannel/pipe/message_pipe.h"
#include "datachannel/pipe/process_watch.h"
#include "datachannel/pipe/token_proof.h"
#include "datachannel/pipe/yield_backoff.h"
#include "datachannel/matching.h"
#include "datachannel/transport.h"

namespace thd::detail::pipe {

struct PipeTuning {
  // Payloads up to this size travel inside their control message.
  size_t inline_bytes = 8192 - 48;
  // How long a waiter drives the pipe itself before it blocks (THD_PIPE_SPIN_US).
  // Longer than the way back from blocking (a thread wake-up or two, tens of µs to
  // milliseconds on a busy host): with 50 µs, one moment of another process on a
  // core made both ranks of a ping-pong block on every message, each too late for
  // the other's spin, until chance put them back in step (thousands of round
  // trips over 100 µs in 300000 where raw UCX had a hundred).
  std::chrono::microseconds spin_budget{1000};
  // Whether a spinning waiter gives its core away between rounds: with more ranks
  // than cores, the rank it waits for may need that core to send.
  bool yield_while_spinning = false;
  // A yield that took at least this long ran another thread (YieldBackoff):
  // THD_PIPE_YIELD_SWITCH_NS, else measured on this host (measure_yield_switch)
  // when the waiters yield.
  std::chrono::nanoseconds yield_switch{1000};
  // How long destruction lets queued sends finish.
  std::chrono::milliseconds close_linger{2000};
  // How long withdrawing a transfer the library has already matched waits for it.
  std::chrono::milliseconds withdraw_wait{5000};
  // Bytes of messages that arrived before their receive held per peer (payloads
  // and UnexpectedMessage::kOverheadBytes each; THD_MAX_UNEXPECTED_BYTES). The
  // libraries cannot hold a sender back, so a peer past it is cut off: PeerLost,
  // and what it sends later is read and dropped. Above what a master-worker
  // session can have in flight to a node (its flow control's 256 MiB and the
  // commands' heads), so that no well-behaved session meets it.
  size_t unexpected_limit = size_t{1} << 30;
  // Pipes that cannot tell a dead peer (MessagePipe::detects_silent_peer_loss):
  // every peer is sent a heartbeat this often, and one silent for heartbeat_timeout
  // is lost (THD_PIPE_HEARTBEAT_TIMEOUT_MS).
  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds heartbeat_timeout{4000};
};

// The defaults with THD_PIPE_SPIN_US, THD_PIPE_HEARTBEAT_TIMEOUT_MS,
// THD_PIPE_YIELD_SWITCH_NS and THD_MAX_UNEXPECTED_BYTES applied; ValueError for a
// malformed value.
PipeTuning pipe_tuning_from_env(const net::EnvLookup& env = net::process_env);
// The environment's tuning, adjusted for this rank's host: with more ranks on it
// than cores, waiters yield their core while they spin, and the cost of a yield
// that switches is measured unless THD_PIPE_YIELD_SWITCH_NS gave it.
PipeTuning pipe_tuning_for(const DataChannelOptions& options);

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
  std::shared_ptr<RequestState> send_blocking(std::span<const uint8_t> data, int dst, const Envelope& envelope,
                                              const RequestMaker& make_request) override;
  void post_recv(std::span<uint8_t> data, int src, const Envelope& envelope,
                 const std::shared_ptr<RequestState>& request) override;
  int recv_blocking(std::span<uint8_t> data, int src, const Envelope& envelope, const RequestSpec& spec) override;
  void cancel(const std::shared_ptr<RequestState>& request, std::exception_ptr why) override;
  bool wait(RequestState& request, net::Deadline until) override;
  std::exception_ptr peer_error(int world_rank) const override;
  bool peer_departed(int world_rank) const override;
  HostCollectives* host_collectives() noexcept override { return host_collectives_; }

 private:
  // What a completion belongs to; every PipeOp the engine hands out is one of these.
  struct EngineOp : PipeOp {
    enum class Kind { Control, SendPart, DataRecv };
    EngineOp(PipeTransport* t, Kind k) : transport(t), kind(k) {}
    void done(std::exception_ptr error, size_t bytes) noexcept override;
    PipeTransport* const transport;
    const Kind kind;
  };
  struct Outgoing;
  // One half of an outgoing message: its control message or its payload.
  struct SendPart : EngineOp {
    explicit SendPart(PipeTransport* t, Outgoing* m) : EngineOp(t, Kind::SendPart), message(m) {}
    Outgoing* const message;
    bool pending = false;
  };
  struct Outgoing {
    Outgoing(PipeTransport* t) : control_part(t, this), data_part(t, this) {}
    std::shared_ptr<RequestState> request;  // holds the keepalive of tensor sends
    int peer = -1;
    std::vector<uint8_t> control;           // header (+ inline payload)
    std::span<const uint8_t> payload;       // announced payload: the caller's memory, or `owned`
    std::vector<uint8_t> owned;             // a copy, where the caller's memory may not be held
    size_t nbytes = 0;
    std::exception_ptr error;
    bool listed = false;  // in sends_ (send_inline's stays out while the pipe finishes it at once)
    SendPart control_part;
    SendPart data_part;
    int pending() const { return int{control_part.pending} + int{data_part.pending}; }
  };
  // The standing control receive of one peer.
  struct ControlInbox : EngineOp {
    ControlInbox(PipeTransport* t, int p, size_t bytes)
        : EngineOp(t, Kind::Control), peer(p), buffer(new uint8_t[bytes]), capacity(bytes) {}
    const int peer;
    std::unique_ptr<uint8_t[]> buffer;
    const size_t capacity;
    bool posted = false;
  };
  // The payload of an announced message, into a receive's memory or, when no
  // receive wants it (mismatch, cancel), into a buffer of its own to discard.
  struct DataRecv : EngineOp {
    explicit DataRecv(PipeTransport* t) : EngineOp(t, Kind::DataRecv) {}
    std::shared_ptr<RequestState> request;  // null: discarding
    int peer = -1;
    size_t expected = 0;
    std::vector<uint8_t> discard;
    bool pending = false;
  };
  using SendMap = std::unordered_map<const RequestState*, std::unique_ptr<Outgoing>>;
  struct Completion {
    EngineOp* op;
    std::exception_ptr error;
    size_t bytes;
  };

  // ---- the handshake (proof_ judges, this moves the hellos) ----
  void prove_token(const PipeAuth& auth);
  bool on_hello(ControlInbox& inbox, size_t bytes);

  // ---- engine (all under mu_) ----
  void settle();
  void on_control(ControlInbox& inbox, std::exception_ptr error, size_t bytes);
  // Checks a control message of a proved peer (not a heartbeat): false, and why,
  // for bytes that are not a thd message or announcement. *header_bytes is where
  // an inline payload starts (small_message_header.h).
  bool parse_control(const ControlInbox& inbox, size_t bytes, detail::FrameHeader* header, size_t* header_bytes,
                     std::string* why) const;
  // The common control message, handled where the pipe reports it instead of
  // queued for settle(): an inline message whose receive is posted. True when it
  // took it. It only matches, copies and finishes the request: no pipe call, as
  // done() may run inside the library's own callback.
  bool take_inline_message(ControlInbox& inbox, size_t bytes) noexcept;
  void on_send_part(SendPart& part, std::exception_ptr error);
  void on_data(DataRecv& op, std::exception_ptr error, size_t bytes);
  void post_control_recv(ControlInbox& inbox);
  // Posts the receives reposts_ holds (callers settle() afterwards).
  void flush_reposts();
  // A message met its receive: check it, then copy its inline `payload` or
  // receive its announced one.
  // `adopt`: the buffer `payload` is in, which a receive of any length may take as
  // its own (accept_match) instead of a copy.
  void deliver(int source, const detail::FrameHeader& header, detail::PostedRecv& recv, const uint8_t* payload,
               std::unique_ptr<uint8_t[]>* adopt = nullptr);
  // deliver() for the rest: announced messages, mismatches.
  void deliver_other(int source, const detail::FrameHeader& header, detail::PostedRecv& recv,
                     const uint8_t* payload, std::unique_ptr<uint8_t[]>* adopt);
  void receive_payload(int peer, uint32_t data_tag, uint64_t bytes, std::shared_ptr<RequestState> request,
                       std::span<uint8_t> into);
  // post_recv with mu_ held.
  void post_recv_locked(std::span<uint8_t> data, int src, const Envelope& envelope,
                        const std::shared_ptr<RequestState>& request);
  void send_to_self(std::span<const uint8_t> data, const Envelope& envelope,
                    const std::shared_ptr<RequestState>& request);
  void lose_peer(int peer, std::exception_ptr why);
  // Holds a message no receive has taken yet, or cuts its sender off when that
  // would take it past tuning_.unexpected_limit.
  void keep_unexpected(int peer, const detail::FrameHeader& header, const uint8_t* payload);
  // Drives the pipe until `finished` holds or `until` passes; false on timeout.
  bool drive_locked(std::unique_lock<std::mutex>& lock, net::Deadline until, const std::function<bool()>& finished);
  void wake_sleeper() noexcept;
  std::exception_ptr closed_error(const std::string& op) const;
  std::exception_ptr lost_error(int peer, const std::string& op) const;

  void progress_loop() noexcept;
  // Carries out what liveness_ decides at `now`: heartbeats out, silent peers
  // lost, peers whose process exited lost (`look_at_processes`: the watch is due a
  // look). Under mu_, from the progress thread.
  void tend_peers(net::Clock::time_point now, bool look_at_processes);
  // Sends a transport-level control message (token proof, heartbeat) under mu_;
  // returns its internal request.
  std::shared_ptr<const RequestState> send_control(int peer, std::vector<uint8_t> bytes, const std::string& what);
  // A send's record in sends_, fresh or reused.
  Outgoing& add_send(const std::shared_ptr<RequestState>& request, int peer);
  // Hands a message whose payload travels inside its control message to the pipe
  // from a record, where send_at_once did not take it (callers try that first).
  // True when the pipe finished it within the call: its outcome is then on `request`, or,
  // for a send without one, in *error. Otherwise the send is listed in sends_
  // under `request`, which `make_request` makes then if it is null.
  bool send_inline(std::span<const uint8_t> data, int dst, const Envelope& envelope,
                   std::shared_ptr<RequestState>& request, const RequestMaker* make_request, std::exception_ptr* error);
  // A small message (at most kAtOnceBytes) built on the stack and handed to
  // MessagePipe::send_at_once; true when it left (then reposts are flushed and
  // completions settled). Most small messages leave this way, with no record,
  // buffer or completion: that bookkeeping was a quarter of a small send's
  // instructions (callgrind).
  bool send_at_once(std::span<const uint8_t> data, int dst, const Envelope& envelope);
  // A record, not in sends_: a spare one, or a new one.
  SendMap::node_type spare_send() {
    if (spare_sends_.empty()) return new_send();
    SendMap::node_type node = std::move(spare_sends_.back());
    spare_sends_.pop_back();
    return node;
  }
  SendMap::node_type new_send();
  void retire_send(SendMap::iterator it);
  void recycle_send(SendMap::node_type node);

  const std::string name_;
  const PipeTuning tuning_;
  std::unique_ptr<MessagePipe> pipe_;
  const uint32_t max_data_tag_;
  HostCollectives* const host_collectives_;  // the pipe's, or null

  mutable std::mutex mu_;  // the engine lock
  bool closing_ = false;
  bool settling_ = false;
  std::deque<Completion> completions_;
  detail::MatchQueues queues_;
  std::vector<std::unique_ptr<ControlInbox>> inboxes_;  // by peer rank; null for this rank
  // Inboxes whose message was handled, to be posted again after the caller's next
  // send (flush_reposts): on a round trip's latency path the re-post is pure cost,
  // and a message that comes first waits in the library's unexpected queue.
  std::vector<ControlInbox*> reposts_;
  std::vector<ControlInbox*> flushing_;  // reposts_ being posted (flush_reposts)
  std::vector<uint32_t> next_data_tag_;                 // by peer rank
  std::vector<size_t> unexpected_bytes_;                // by peer rank: charged for its unexpected messages
  std::vector<char> cut_off_;                           // by peer rank: past the limit; its messages are dropped
  SendMap sends_;
  // Finished sends' map nodes with their Outgoing (and its control buffer), reused:
  // a small message costs no allocation here.
  std::vector<SendMap::node_type> spare_sends_;
  std::vector<std::unique_ptr<Outgoing>> orphan_sends_;  // failed/withdrawn, pipe still busy
  std::unordered_map<DataRecv*, std::unique_ptr<DataRecv>> data_recvs_;
  size_t transfers_ = 0;  // pipe sends and payload receives in flight

  // Which peers proved the token (token_proof.h).
  TokenProof proof_;
  // Heartbeats and the process watch (liveness.h), under mu_; a copy of
  // liveness_.heartbeats(), read for every control message.
  Liveness liveness_;
  const bool heartbeats_;
  std::vector<std::shared_ptr<const RequestState>> heartbeat_out_;  // by rank: the latest heartbeat
  // Who is lost and why (lost_peers.h), read from any thread.
  LostPeers lost_peers_;

  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<int> blockers_{0};  // waiters blocked on their requests
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
