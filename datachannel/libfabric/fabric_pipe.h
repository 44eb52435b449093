// The libfabric MessagePipe: tagged sends and receives on one reliable-datagram
// endpoint, completions read from one completion queue. docs/backend_libfabric.md
// has the whole picture; message_pipe.h the contract.
//
// Ops: every send or receive is an Op that owns its fi_context2 (the provider's
// per-op scratch, FI_CONTEXT/FI_CONTEXT2) and its memory registration; the
// completion's op_context leads back to it. Receives shorter than 16 KiB land in
// a buffer of the op's own and are copied out, so the provider never truncates a
// short message (fabric_pipe.cpp, kLandingBytes); longer ones are zero-copy. An op the provider refuses with
// -FI_EAGAIN waits in a queue, in order, and is posted again by progress().
//
// Native matching: where the provider's tag bits hold tag_layout.h's NativeLayout
// beside the pipe's own and it answers a peek (FI_PEEK) at construction,
// matches_natively() is true and thd's point-to-point messages that fit go
// through send_tagged/recv_tagged/probe_tagged (fi_tsend, fi_trecv with an ignore
// mask, fi_trecvmsg with FI_PEEK), matched by the provider itself; so do its
// collective messages, in pipe/collective_tag.h's layout, where the bits hold it.
//
// Peers: a rank that destroys its pipe sends every peer a goodbye (a reserved tag,
// tag_layout.h); a send that fails means the path to its peer is gone. Either way
// the peer is lost: its pending receives are withdrawn with thd::PeerLost, later
// sends to it fail at once, later receives get only what it sent before leaving.
// On shm, whose endpoints reach in-process peers through their memory, a closed
// pipe's endpoint stays open until its in-process peers have closed
// (in_process_peers.h).
//
// Threading: as message_pipe.h says; sleep() and interrupt() touch only atomics,
// the eventfd and the completion queue's fd, never libfabric, so FI_THREAD_DOMAIN
// holds.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <rdma/fi_eq.h>

#include "datachannel/libfabric/endpoint.h"
#include "datachannel/libfabric/in_process_peers.h"
#include "datachannel/libfabric/memory_region.h"
#include "datachannel/libfabric/sleeper.h"
#include "datachannel/libfabric/tag_layout.h"
#include "datachannel/pipe/collective_tag.h"
#include "datachannel/pipe/message_pipe.h"

namespace thd::detail::libfabric {

class FabricPipe final : public pipe::MessagePipe {
 public:
  // `peers`: each rank's address in the endpoint's address vector (this rank's
  // FI_ADDR_NOTAVAIL: inserted at its first tagged self-send). Posts the
  // goodbye receive; ConnectionError when the provider refuses it. `lifeline`:
  // where the endpoint is parked when the pipe closes, and `in_process_peers`
  // the peers' lifelines this pipe keeps open until it closes (both only where
  // the provider shares in-process peers' memory: in_process_peers.h).
  FabricPipe(int rank, int size, Endpoint endpoint, std::vector<fi_addr_t> peers, TagLayout tags,
             RegistrationPolicy registration, std::shared_ptr<Lifeline> lifeline = nullptr,
             std::vector<std::shared_ptr<Lifeline>> in_process_peers = {});
  // Lets sends in flight finish, says goodbye to every peer, withdraws every
  // receive, waits for all of it at most kCloseWait, closes the endpoint. Calls no
  // done(): what had not completed is simply over.
  ~FabricPipe() override;

  std::string_view name() const noexcept override { return "libfabric"; }
  uint32_t max_tag() const noexcept override { return tags_.max_tag(); }

  void send(int peer, uint32_t tag, std::span<const uint8_t> data, pipe::PipeOp* op) override;
  void recv(int peer, uint32_t tag, std::span<uint8_t> data, pipe::PipeOp* op) override;
  bool cancel(pipe::PipeOp* op) override;
  // shm (1.17) spins forever truncating a message above its inject size, so its
  // pipe is not handed a receive shorter than a large message (message_pipe.h).
  bool truncates_safely() const noexcept override { return truncates_safely_; }
  // fi_tinject: up to the provider's inject_size, when no send to the peer waits
  // in this pipe's queue (which it would overtake).
  bool send_at_once(int peer, uint32_t tag, std::span<const uint8_t> data) override;

  int progress() override;
  bool arm() override;
  void sleep(net::Deadline until, bool busy) override;
  void interrupt() noexcept override { sleeper_.interrupt(); }

  std::exception_ptr peer_error(int peer) const override;
  bool peer_departed(int peer) const override;
  // libfabric 1.17's tcp provider drops a broken connection without a completion
  // error, and shm has no liveness check: PipeTransport's heartbeats do it.
  bool detects_silent_peer_loss() const noexcept override { return false; }

  // ---- messages matched by libfabric itself (message_pipe.h) ----
  bool matches_natively() const noexcept override { return native_.has_value() && peeks_; }
  std::optional<uint64_t> native_tag(const Envelope& envelope, int sender) const override {
    if (envelope.context % 2 == 1) return collective_ ? collective_->tag_of(envelope, sender) : std::nullopt;
    return native_ ? native_->tag_of(envelope, sender) : std::nullopt;
  }
  NativeMatch native_match(const Envelope& envelope, int source) const override;
  NativeOrigin native_origin(uint64_t tag) const override;
  Envelope native_envelope(const Envelope& posted, uint64_t tag, size_t bytes) const override;
  // To this rank too: the provider delivers to the endpoint's own address.
  void send_tagged(int peer, uint64_t tag, std::span<const uint8_t> data, pipe::PipeOp* op) override;
  bool send_tagged_at_once(int peer, uint64_t tag, std::span<const uint8_t> data) override;
  void recv_tagged(int peer, uint64_t tag, uint64_t mask, std::span<uint8_t> data, uint64_t* sender_tag,
                   pipe::PipeOp* op) override;
  // fi_trecvmsg with FI_PEEK; waits at most a second for the provider's answer.
  std::optional<Probed> probe_tagged(uint64_t tag, uint64_t mask) override;

  // The provider in use ("tcp;ofi_rxm", "shm").
  std::string_view provider() const noexcept { return endpoint_.provider(); }

 private:
  struct Op;
  // A completed op whose done() progress() has yet to call. `withdrawn`: it ended
  // in FI_ECANCELED because cancel() asked.
  struct Finished {
    pipe::PipeOp* user;
    std::exception_ptr error;
    size_t bytes;
    bool withdrawn;
  };

  void check_args(int peer, uint32_t tag, pipe::PipeOp* op, std::string_view what) const;
  void check_native(int peer, pipe::PipeOp* op, bool any_allowed, std::string_view what) const;
  // Puts this rank's own address into the address vector (for tagged self-sends).
  void insert_self();
  // A peek's answer: nullopt when the provider gave none in time or refused it.
  enum class PeekResult : uint8_t { Found, NoMessage, Failed };
  PeekResult peek(uint64_t tag, uint64_t ignore, Probed* found, std::chrono::milliseconds wait);
  void check_peer_and_tag(int peer, uint32_t tag, std::string_view what) const;
  void start(std::unique_ptr<Op> op);
  int post(Op& op) noexcept;
  std::exception_ptr post_error(Op& op, int rc);
  void post_queued();
  void withdraw_if_lost(Op& op);
  bool post_internal(Op& op);

  void read_completions();
  void on_completion(const fi_cq_tagged_entry& entry);
  void on_error(const fi_cq_err_entry& entry);
  void finish(Op& op, std::exception_ptr error, size_t bytes, bool withdrawn = false);
  std::exception_ptr too_long(const Op& op, size_t message_bytes, uint64_t message_tag = 0) const;
  // The tag bits the provider matches on.
  uint64_t usable_mask() const noexcept {
    return tags_.usable() >= 64 ? ~uint64_t{0} : (uint64_t{1} << tags_.usable()) - 1;
  }
  int deliver();

  void lose_peer(int peer, const std::string& why, const Op* completing = nullptr);
  void close() noexcept;

  Endpoint endpoint_;
  std::vector<fi_addr_t> peers_;
  TagLayout tags_;
  RegistrationPolicy registration_;
  uint64_t next_key_ = 1;
  size_t max_msg_size_;
  size_t inject_size_;  // the provider's fi_inject limit; 0: none
  bool truncates_safely_;
  std::shared_ptr<Lifeline> lifeline_;
  std::vector<std::shared_ptr<Lifeline>> in_process_peers_;
  Sleeper sleeper_;

  std::unordered_map<pipe::PipeOp*, std::unique_ptr<Op>> ops_;
  std::vector<std::deque<Op*>> queued_;  // by peer
  std::deque<Op*>& queue_of(int peer);
  // An op's queue: its peer's, or for every tagged receive one of their own (their
  // posting order is their matching order, whichever peer they name).
  std::deque<Op*>& queue_for(const Op& op);
  std::vector<Finished> finished_;
  std::unique_ptr<Op> goodbye_recv_;
  std::vector<std::unique_ptr<Op>> goodbye_sends_;
  std::vector<std::exception_ptr> peer_errors_;
  std::vector<char> departed_;  // by peer: lost by its goodbye, having finished
  bool closing_ = false;

  std::optional<NativeLayout> native_;  // where the provider's tag bits hold it
  // Collectives' layout (pipe/collective_tag.h), beside native_ where the bits
  // also hold it: its two top bits both set, which no other tag here has.
  std::optional<pipe::CollectiveTagLayout> collective_;
  bool peeks_ = false;                  // the provider answered the construction's peek
  std::unique_ptr<Op> peek_;            // the peek in use
  std::vector<std::unique_ptr<Op>> unanswered_peeks_;  // kept for the provider until close

  // Set by arm() for the next sleep(): 0 block on the completion queue's fd; > 0
  // nap this many microseconds; < 0 no wait object, nap by `busy` and idleness.
  std::atomic<int64_t> nap_us_{0};
  std::atomic<int64_t> idle_nap_us_;
};

}  // namespace thd::detail::libfabric
