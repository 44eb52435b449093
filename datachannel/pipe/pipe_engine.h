// thd's MPI matching over a MessagePipe's control messages (mpi, ucx, libfabric):
// matching on (context, tag), kind and size checks before a payload byte lands,
// unexpected messages, self-sends, cancel, written once (docs/backends.md,
// "Message-library backends"). PipeTransport (pipe_transport.h) makes it a
// Transport: it holds the lock, drives the pipe and runs the handshake.
//
// Each message is one control message on the pipe's control tag: the tcp backend's
// 48-byte frame header (datachannel/wire.h), then, for payloads of at most
// inline_bytes, the payload itself (kind Message). A larger payload is announced
// instead (kind ReadyToSend, its rendezvous id the pipe tag that carries it) and
// sent at once on that tag, a sequence number per destination; the receiver posts
// the pipe receive for it straight into the matched receive's memory, so the
// library's own rendezvous moves it without a copy. Control messages from one peer
// arrive in send order (the pipe's ordering per (peer, tag)), which gives MPI's
// non-overtaking rule. A peer's first control message is its token proof
// (token_proof.h); heartbeats (liveness.h) are read and dropped here.
//
// Where the pipe's library matches tags itself (MessagePipe::matches_natively), a
// message whose envelope fits the pipe's tag skips all that: it is sent with
// send_tagged and received with recv_tagged straight into the receive's memory,
// and checked against the receive when it lands (its kind from the tag:
// a point-to-point message's dtype, a collective's op, dtype, reduce op, root and
// count; and its length). A receive of any length probes for its length first,
// and receives after it that could take the same messages wait until it has.
//
// Threading: every method is called under the owner's lock, which thereby guards
// the match queues and every pipe call. The pipe reports completions through
// PipeOp::done() while the lock is held; done() only queues them and settle()
// handles them afterwards, so a completion never re-enters the engine.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "datachannel/matching.h"
#include "datachannel/pipe/liveness.h"
#include "datachannel/pipe/lost_peers.h"
#include "datachannel/pipe/message_pipe.h"
#include "datachannel/pipe/pipe_tuning.h"
#include "datachannel/pipe/token_proof.h"
#include "datachannel/transport.h"
#include "datachannel/wire.h"

namespace thd::detail::pipe {

class PipeEngine {
 public:
  // Drives the pipe until the predicate holds or the deadline passes (false then);
  // the owner's, as only it may let go of its lock between rounds.
  using Drive = std::function<bool(net::Deadline, const std::function<bool()>&)>;

  // The engine does not own the parts it consults: `proof` says which peers
  // proved the token, `liveness` hears from them, `lost` records who is gone.
  PipeEngine(std::unique_ptr<MessagePipe> pipe, const PipeTuning& tuning, TokenProof& proof, Liveness& liveness,
             LostPeers& lost);
  // Destroys the pipe before the ops it may still report to.
  ~PipeEngine() { close_pipe(); }
  PipeEngine(const PipeEngine&) = delete;
  PipeEngine& operator=(const PipeEngine&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  MessagePipe& pipe() noexcept { return *pipe_; }
  // Posts every peer's standing control receive (the handshake's first step).
  void open();

  // ---- closing: close() refuses new work, stop() stops reposting receives,
  // fail_all() fails what is left, close_pipe() destroys the pipe (its late
  // completions are dropped) ----
  void close() noexcept { closing_ = true; }
  bool closing() const noexcept { return closing_; }
  void stop() noexcept { stopped_ = true; }
  // No send is in the pipe's hands any more but those to lost peers.
  bool sends_settled() const;
  void fail_all();
  void close_pipe() noexcept;

  // ---- sending ----
  void post_send(std::span<const uint8_t> data, int dst, const Envelope& envelope,
                 const std::shared_ptr<RequestState>& request);
  // Whether a blocking send of `data` to `dst` may take the inline path below
  // (send_at_once, then send_inline): a small message to a healthy peer.
  bool sends_inline(std::span<const uint8_t> data, int dst, const Envelope& envelope) const {
    return !closing_ && dst >= 0 && dst < size_ && dst != rank_ && data.size() <= tuning_.inline_bytes &&
           !(lost_.any() && lost_.error(dst)) && !(native_ && pipe_->native_tag(envelope, rank_));
  }
  // A small message (at most kAtOnceBytes) built on the stack and handed to
  // MessagePipe::send_at_once; true when it left (then reposts are flushed and
  // completions settled). Most small messages leave this way, with no record,
  // buffer or completion: that bookkeeping was a quarter of a small send's
  // instructions (callgrind).
  bool send_at_once(std::span<const uint8_t> data, int dst, const Envelope& envelope);
  // A small message the library matches itself, to a healthy peer, handed to
  // MessagePipe::send_tagged_at_once: true when it left (nothing to complete).
  bool send_native_at_once(std::span<const uint8_t> data, int dst, const Envelope& envelope);
  // Hands a message whose payload travels inside its control message to the pipe
  // from a record, where send_at_once did not take it (callers try that first).
  // True when the pipe finished it within the call: its outcome is then on `request`, or,
  // for a send without one, in *error. Otherwise the send is listed in sends_
  // under `request`, which `make_request` makes then if it is null.
  bool send_inline(std::span<const uint8_t> data, int dst, const Envelope& envelope,
                   std::shared_ptr<RequestState>& request, const RequestMaker* make_request, std::exception_ptr* error);
  // Sends a transport-level control message (token proof, heartbeat); returns its
  // internal request.
  std::shared_ptr<const RequestState> send_control(int peer, std::vector<uint8_t> bytes, const std::string& what);
  // Whether a send_control request is still in the pipe's hands.
  bool in_flight(const RequestState* request) const { return sends_.contains(request); }

  // ---- receiving ----
  void post_recv(std::span<uint8_t> data, int src, const Envelope& envelope,
                 const std::shared_ptr<RequestState>& request);

  // ---- the direct path (PipeTransport's: small blocking messages straight to
  // the pipe, MessagePipe::send_direct/recv_direct) ----
  // The library matches this channel's point-to-point messages itself.
  bool native() const noexcept { return native_; }
  // The largest message the direct path takes: a small one, which leaves whole
  // within its send and lands whole within the library's callback.
  static constexpr size_t kDirectBytes = 256;
  // Whether a blocking send to `dst` may go straight to the pipe: the channel is
  // open and `dst` another rank not lost. Its order needs nothing more: every
  // message the library matches is handed to it at once (send_native and
  // send_native_at_once never hold one back), on the one endpoint to each peer.
  bool direct_send_allowed(int dst) const noexcept {
    return !closing_ && dst >= 0 && dst < size_ && dst != rank_ && !(lost_.any() && lost_.error(dst));
  }
  // Whether a blocking receive from `src` may be posted straight to the pipe: as
  // above (a receive from a lost peer takes the general path, which fails it
  // with the transport's error), from one rank, and no receive of the engine's
  // held back from the library (native_waiting_, a receive of any length ahead
  // of it). The library gives a message to the oldest receive it holds, so a
  // direct receive comes after every receive posted before it, as MPI's order
  // asks, but would overtake one the engine has not posted yet.
  bool direct_recv_allowed(int src) const noexcept {
    return native_waiting_ == 0 && direct_send_allowed(src);
  }

  // ---- progress ----
  // Posts the control receives handled since the last flush, one pipe progress
  // round, and what it completed handled: how many pipe ops completed.
  int drive_once() {
    if (!reposts_.empty()) flush_reposts();
    if (native_waiting_ != 0) advance_native();
    const int n = pipe_->progress();
    // A message take_inline_message handled leaves nothing to settle.
    if (!completions_.empty()) settle();
    return n;
  }
  // Handles the completions the pipe reported.
  void settle();
  // Posts the receives reposts_ holds (callers settle() afterwards).
  void flush_reposts();
  bool reposts_pending() const noexcept { return !reposts_.empty(); }
  // Transfers are in flight (the pipe is polled often while asleep).
  bool busy() const noexcept { return transfers_ > 0; }

  // Withdraws `request` and fails it with `why`; a transfer the library already
  // matched is waited for through `drive` before it returns (its memory is the
  // caller's).
  void cancel(const std::shared_ptr<RequestState>& request, std::exception_ptr why, const Drive& drive);
  // Records `peer` lost and fails what involves it.
  void lose_peer(int peer, std::exception_ptr why);
  std::exception_ptr peer_error(int world_rank) const { return lost_.error(world_rank); }
  std::exception_ptr closed_error(const std::string& op) const;
  std::exception_ptr lost_error(int peer, const std::string& op) const;

 private:
  // What a completion belongs to; every PipeOp the engine hands out is one of these.
  struct EngineOp : PipeOp {
    enum class Kind { Control, SendPart, DataRecv, NativeRecv };
    EngineOp(PipeEngine* t, Kind k) : engine(t), kind(k) {}
    void done(std::exception_ptr error, size_t bytes) noexcept override;
    PipeEngine* const engine;
    const Kind kind;
  };
  struct Outgoing;
  // One half of an outgoing message: its control message or its payload.
  struct SendPart : EngineOp {
    explicit SendPart(PipeEngine* t, Outgoing* m) : EngineOp(t, Kind::SendPart), message(m) {}
    Outgoing* const message;
    bool pending = false;
  };
  struct Outgoing {
    Outgoing(PipeEngine* t) : control_part(t, this), data_part(t, this) {}
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
    // Sends `data` from the caller's memory, or from a copy when `copy`: a pipe that
    // cannot tell a dead peer may keep a send to it forever, while the request must
    // be failed when the peer is found lost, so bytes no tensor keeps alive travel
    // from a copy and failing the request frees nothing in use.
    void set_payload(std::span<const uint8_t> data, bool copy) {
      nbytes = data.size();
      payload = data;
      if (copy) {
        owned.assign(data.begin(), data.end());
        payload = owned;
      }
    }
  };
  // The standing control receive of one peer.
  struct ControlInbox : EngineOp {
    ControlInbox(PipeEngine* t, int p, size_t bytes)
        : EngineOp(t, Kind::Control), peer(p), buffer(new uint8_t[bytes]), capacity(bytes) {}
    const int peer;
    std::unique_ptr<uint8_t[]> buffer;
    const size_t capacity;
    bool posted = false;
  };
  // The payload of an announced message, into a receive's memory or, when no
  // receive wants it (mismatch, cancel), into a buffer of its own to discard.
  struct DataRecv : EngineOp {
    explicit DataRecv(PipeEngine* t) : EngineOp(t, Kind::DataRecv) {}
    std::shared_ptr<RequestState> request;  // null: discarding
    int peer = -1;
    size_t expected = 0;
    std::vector<uint8_t> discard;
    bool pending = false;
  };
  // A receive the library matches itself (MessagePipe::matches_natively): posted
  // to it at once, or held back (`posted` false) while a receive of any length
  // ahead of it that could take the same messages waits for its message's length.
  struct NativeRecv : EngineOp {
    explicit NativeRecv(PipeEngine* t) : EngineOp(t, Kind::NativeRecv) {}
    std::shared_ptr<RequestState> request;
    std::span<uint8_t> data;
    int source = kAnySource;
    Envelope envelope;
    MessagePipe::NativeMatch match;
    uint64_t sender_tag = 0;
    bool posted = false;
    // The request failed before its message was taken (a mismatch of a receive of
    // any length): the message goes here and is dropped.
    std::vector<uint8_t> discard;
    bool discarding = false;
    // Which posting the node serves: nodes are reused (spare_native_), and a
    // cancel() waiting for a matched receive must not mistake the next one for it.
    uint64_t serial = 0;
    std::list<std::unique_ptr<NativeRecv>>::iterator self;
  };
  using SendMap = std::unordered_map<const RequestState*, std::unique_ptr<Outgoing>>;
  struct Completion {
    EngineOp* op;
    std::exception_ptr error;
    size_t bytes;
  };


  bool on_hello(ControlInbox& inbox, size_t bytes);
  // ---- the messages the library matches itself ----
  // Whether a message with `envelope` from `peer` (kAnySource: any) is one.
  bool native_envelope(const Envelope& envelope, int peer) const {
    return native_ && pipe_->native_tag(envelope, peer == kAnySource ? 0 : peer).has_value();
  }
  void send_native(uint64_t tag, std::span<const uint8_t> data, int dst, const std::shared_ptr<RequestState>& request);
  void post_native_recv(std::span<uint8_t> data, int src, const Envelope& envelope,
                        const std::shared_ptr<RequestState>& request);
  // Posts the held-back receives no receive ahead of them holds back any more, and
  // gives a receive of any length whose message arrived its buffer.
  void advance_native();
  void post_native(NativeRecv& r);
  void on_native(NativeRecv& r, std::exception_ptr error, size_t bytes);
  void erase_native(NativeRecv& r);
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
  void send_to_self(std::span<const uint8_t> data, const Envelope& envelope,
                    const std::shared_ptr<RequestState>& request);
  // Holds a message no receive has taken yet, or cuts its sender off when that
  // would take it past tuning_.unexpected_limit.
  void keep_unexpected(int peer, const detail::FrameHeader& header, const uint8_t* payload);
  // A send's record in sends_, fresh or reused.
  Outgoing& add_send(const std::shared_ptr<RequestState>& request, int peer);
  // A record, not in sends_: a spare one, or a new one.
  SendMap::node_type spare_send() {
    if (spare_sends_.empty()) return new_send();
    SendMap::node_type node = std::move(spare_sends_.back());
    spare_sends_.pop_back();
    return node;
  }
  SendMap::node_type new_send();
  void retire_send(SendMap::iterator it) { recycle_send(sends_.extract(it)); }
  void recycle_send(SendMap::node_type node);

  const int rank_;
  const int size_;
  const std::string name_;
  const PipeTuning tuning_;
  std::unique_ptr<MessagePipe> pipe_;
  const uint32_t max_data_tag_;
  TokenProof& proof_;
  Liveness& liveness_;
  const bool heartbeats_;  // liveness_.heartbeats(), read for every control message
  LostPeers& lost_;

  // The pipe matches the envelopes that fit its tags itself (tuning and pipe agree).
  const bool native_;
  std::list<std::unique_ptr<NativeRecv>> native_recvs_;  // in posting order
  size_t native_waiting_ = 0;                           // of them not posted yet
  // Finished receives' list nodes, spliced back into native_recvs_ by the next
  // post: a receive costs no allocation here.
  std::list<std::unique_ptr<NativeRecv>> spare_native_;
  uint64_t native_serial_ = 0;

  bool closing_ = false;
  bool stopped_ = false;
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
};

}  // namespace thd::detail::pipe
