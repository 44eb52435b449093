// UcxMessagePipe: the MessagePipe contract (pipe/message_pipe.h) over one UCP
// worker. Every operation is one tagged UCX request (ucp_tag_send_nbx, and
// ucp_tag_recv_nbx or, for a message already here, ucp_tag_probe_nb +
// ucp_tag_msg_recv_nbx) straight from or into the caller's memory; UCX picks eager
// or rendezvous itself and registers the memory it needs (its registration cache).
//
// Completions: an op's done() is called from UCX's callbacks (inside
// ucp_worker_progress, ucp_request_cancel or ucp_ep_close_nbx), or from send()/
// recv() for an operation UCX finishes at once (an eager send, a receive of a
// message already here), as message_pipe.h allows: a small send's request is then
// complete before its caller waits. done() must not call back into the pipe
// (message_pipe.h); PipeTransport's only queues the completion.
//
// Threading: every method but sleep() and interrupt() is called under the caller's
// lock (the worker is UCS_THREAD_MODE_SERIALIZED). sleep() touches no UCX state (it
// polls fds); interrupt() writes an eventfd.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <ucp/api/ucp.h>

#include "datachannel/net/fd.h"
#include "datachannel/pipe/collective_tag.h"
#include "datachannel/pipe/message_pipe.h"
#include "datachannel/ucx/tag_layout.h"
#include "datachannel/ucx/ucx_handles.h"
#include "datachannel/ucx/ucx_pipe.h"

namespace thd::detail::ucx {

// The pipe's state in every UCX request (the context's request_size); valid from
// when the request is returned until ucp_request_free.
struct RequestSlot {
  // GoodbyeSend/GoodbyeRecv: the pipe's own goodbyes, with no op.
  enum class Kind : uint8_t { Send, Recv, GoodbyeSend, GoodbyeRecv };
  pipe::PipeOp* op = nullptr;
  int peer = -1;
  uint32_t tag = 0;
  size_t bytes = 0;  // what a send sends, or the room a receive has
  Kind kind = Kind::Send;
  // Set only while cancel() runs ucp_request_cancel: a UCS_ERR_CANCELED completion
  // then is the withdrawal cancel() reports, not a done().
  bool withdrawing = false;
  // The pipe is being destroyed (or the op is the pipe's own): nobody is told.
  bool orphaned = false;
  // Filled in for a request UCX returned. A callback for a request that is not
  // live is for the one being posted, finished inside the posting call.
  bool live = false;
  // A tagged receive's (recv_tagged): where the message's own tag goes.
  ucp_tag_t* sender_out = nullptr;
  // The pipe's list of live requests that have an op (cancel, lost peers and the
  // destructor walk it). Intrusive, in UCX's own request memory: a map from op to
  // request cost an allocation and two hash lookups per message.
  RequestSlot* prev = nullptr;
  RequestSlot* next = nullptr;

  static void init(void* request) noexcept { new (request) RequestSlot(); }
};

class UcxMessagePipe final : public pipe::MessagePipe {
 public:
  // Takes this rank's context and worker; posts the receive for goodbyes.
  UcxMessagePipe(int rank, int size, UniqueContext context, UniqueWorker worker, const PipeSettings& settings);
  // Orphans every pending op (no done() from here on), withdraws the receives,
  // says goodbye to the live peers, closes the endpoints (waiting at most
  // settings.close_timeout), then frees the worker and the context.
  ~UcxMessagePipe() override;

  // Creates an endpoint to every peer in `addresses` (indexed by rank; this
  // rank's own entry is not used). ConnectionError when UCX cannot reach one.
  void connect(const std::vector<std::vector<uint8_t>>& addresses);
  // The endpoint to this rank's own worker, for send_tagged to itself.
  void connect_self();
  // Set-up's last step: a Hello to and from every peer, so that every endpoint is
  // known to carry messages. TimeoutError naming the silent ranks after `until`.
  void greet_peers(net::Deadline until);

  std::string_view name() const noexcept override { return "ucx"; }
  uint32_t max_tag() const noexcept override { return 0xffffffffU; }
  void send(int peer, uint32_t tag, std::span<const uint8_t> data, pipe::PipeOp* op) override;
  // UCX's short eager path (UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL): no request, no callback.
  bool send_at_once(int peer, uint32_t tag, std::span<const uint8_t> data) override;
  void recv(int peer, uint32_t tag, std::span<uint8_t> data, pipe::PipeOp* op) override;
  bool cancel(pipe::PipeOp* op) override;
  void forget(pipe::PipeOp* op) noexcept override;
  int progress() override;
  bool arm() override;
  void sleep(net::Deadline until, bool busy) override;
  void interrupt() noexcept override;
  std::exception_ptr peer_error(int peer) const override;
  bool peer_departed(int peer) const override;
  // Loses the peer as an endpoint error does: its endpoint is closed with
  // UCP_EP_CLOSE_FLAG_FORCE and its receives are cancelled at the next progress().
  void peer_lost(int peer, std::string_view why) override;

  // ---- messages matched by UCX itself (message_pipe.h): point-to-point ones in
  // tag_layout.h's native layout, for worlds whose every rank fits its sender
  // field; collective ones in pipe/collective_tag.h's, where the world leaves it
  // room ----
  bool matches_natively() const noexcept override { return size() <= kMaxNativeSender + 1; }
  std::optional<uint64_t> native_tag(const Envelope& envelope, int sender) const override {
    if (envelope.context % 2 == 0) return ucx::native_tag(envelope, sender);
    return collective_ ? collective_->tag_of(envelope, sender) : std::nullopt;
  }
  NativeMatch native_match(const Envelope& envelope, int source) const override {
    if (envelope.context % 2 == 1) {
      if (!collective_) return {};
      const auto m = collective_->match(envelope, source);
      return {m.tag, m.mask};
    }
    const auto m = ucx::native_match(envelope, source);
    return {m.tag, m.mask};
  }
  NativeOrigin native_origin(uint64_t tag) const override;
  Envelope native_envelope(const Envelope& posted, uint64_t tag, size_t bytes) const override;
  // To this rank too, through an endpoint to its own worker made at the first such send.
  void send_tagged(int peer, uint64_t tag, std::span<const uint8_t> data, pipe::PipeOp* op) override;
  bool send_tagged_at_once(int peer, uint64_t tag, std::span<const uint8_t> data) override;
  void recv_tagged(int peer, uint64_t tag, uint64_t mask, std::span<uint8_t> data, uint64_t* sender_tag,
                   pipe::PipeOp* op) override;
  std::optional<Probed> probe_tagged(uint64_t tag, uint64_t mask) override;
  // The direct path: the native tag packed here, then send_whole, or a receive
  // that completes through its callback only (no probe first).
  bool offers_direct() const noexcept override { return matches_natively(); }
  bool send_direct(int peer, const Envelope& envelope, std::span<const uint8_t> data) override;
  bool recv_direct(int peer, const Envelope& envelope, std::span<uint8_t> data, DirectTags* tags,
                   pipe::PipeOp* op) override;

 private:
  struct Peer {
    UcxMessagePipe* pipe = nullptr;
    int rank = -1;
    ucp_ep_h ep = nullptr;
    std::exception_ptr error;  // PeerLost once lost
    bool departed = false;     // lost by its goodbye, having finished
  };
  // The memory-type seam: every UCX operation names the memory it moves. Host
  // memory now (UCS_MEMORY_TYPE_HOST spares UCX a lookup per operation); a CUDA
  // path passes UCS_MEMORY_TYPE_CUDA here and nothing else changes in this class.
  // Both record the outcome of an operation UCX finishes at once (when it has an
  // op) and return the request of one still in flight, else nullptr.
  void* post_send(int peer, ucp_tag_t tag, const void* data, size_t bytes, ucs_memory_type_t memory,
                  RequestSlot::Kind kind, uint32_t user_tag, pipe::PipeOp* op);
  void* post_recv(int peer, ucp_tag_t tag, ucp_tag_t mask, void* data, size_t bytes, ucs_memory_type_t memory,
                  RequestSlot::Kind kind, uint32_t user_tag, pipe::PipeOp* op, ucp_tag_t* sender_out = nullptr);
  // send_at_once with a whole UCX tag.
  bool send_whole(int peer, ucp_tag_t tag, std::span<const uint8_t> data);
  void post_goodbye_recv(int peer);
  void repost_goodbye_recvs();
  // Frees the requests complete() left in spent_.
  void free_spent() noexcept;
  // A received message's request, done with: kept in spent_, or freed when it is full.
  void retire(void* request) noexcept {
    if (spent_.size() < kSpentRequests) {
      spent_.push_back(request);
    } else {
      ucp_request_free(request);
    }
  }
  void goodbye_from(ucp_tag_t sender_tag) noexcept;

  // Takes over what ucp_*_nbx returned: a request becomes live and pending; an
  // outcome known at once (or one complete() already took) is finished.
  void* adopt(ucs_status_ptr_t request, const RequestSlot& slot, size_t length, ucp_tag_t sender_tag = 0);
  // A send UCX left in flight although told to finish it at once: waited for here
  // (the caller's memory is not used after send_at_once), or its peer lost.
  void finish_stray_send(int peer, size_t bytes, void* request);
  static void on_send_done(void* request, ucs_status_t status, void* user_data) noexcept;
  static void on_recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                           void* user_data) noexcept;
  // recv_direct's: a direct receive's message, whole, goes straight to its
  // DirectRecv::arrived; anything else to on_recv_done.
  static void on_direct_recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                                  void* user_data) noexcept;
  static void on_peer_error(void* arg, ucp_ep_h ep, ucs_status_t status) noexcept;
  void complete(void* request, ucs_status_t status, size_t length, ucp_tag_t sender_tag) noexcept;
  // Reports an op's outcome to its done() (or handles a goodbye).
  void finish(const RequestSlot& slot, ucs_status_t status, size_t length, ucp_tag_t sender_tag) noexcept;
  // An op that failed before UCX saw it.
  void fail_at_once(pipe::PipeOp* op, std::exception_ptr error) noexcept;
  // The pending list: the live requests that have an op.
  void link(RequestSlot& slot) noexcept;
  void unlink(RequestSlot& slot) noexcept;
  RequestSlot* find_pending(const pipe::PipeOp* op) noexcept;
  std::exception_ptr failure(const RequestSlot& slot, ucs_status_t status, size_t length) noexcept;

  // Records a peer as lost (first reason wins); the rest happens in progress().
  void lose_peer(int peer, std::string why) noexcept;
  // Fails the receives still waiting on lost peers and closes their endpoints.
  void settle_lost_peers();
  void check_peer(int peer, std::string_view what) const {
    if (peer < 0 || peer >= size() || peer == rank()) [[unlikely]] throw_bad_peer(peer, what);
  }
  [[noreturn]] void throw_bad_peer(int peer, std::string_view what) const;
  // One ucp_worker_progress round; true if it did anything.
  bool drive_worker();
  // The destructor's waiting: drive the worker, else sleep on its fd briefly.
  void wait_briefly(net::Deadline until);
  void say_goodbye(net::Deadline until);
  void close_endpoints(const std::vector<bool>& sends_stuck, net::Deadline until);

  const PipeSettings settings_;
  // Where this world's collectives fit UCX's tag (bit 63, the internal bit, and
  // bit 62, the native bit, both set mark them).
  const std::optional<pipe::CollectiveTagLayout> collective_;
  UniqueContext context_;
  UniqueWorker worker_;
  int worker_fd_ = -1;                                // ucp_worker_get_efd: owned by the worker
  net::UniqueFd interrupt_fd_;                        // eventfd for interrupt()
  std::atomic<bool> wakeup_broken_{false};            // ucp_worker_arm failed: sleep in short slices
  std::vector<Peer> peers_;                           // by rank; never resized (endpoints point at their entry)
  RequestSlot pending_;                               // the pending list's sentinel (circular)
  ucp_request_param_t host_send_param_{};             // every send's from host memory
  ucp_request_param_t at_once_param_{};               // send_at_once's
  ucp_request_param_t direct_recv_param_{};           // recv_direct's: completes through its callback only
                                                      // (on_direct_recv_done)
  int completed_ = 0;                                 // done() calls since progress() began
  std::vector<int> newly_lost_;                       // peers lost since the last settle_lost_peers()
  pipe::PipeOp* withdrawn_ = nullptr;                 // the op ucp_request_cancel just withdrew
  const RequestSlot* posting_ = nullptr;              // during a ucp_*_nbx call: the slot of its request
  std::vector<void*> goodbye_requests_;               // by rank: the posted receive for its goodbye
  std::vector<int> goodbye_reposts_;                  // peers whose goodbye receive ended without one
  int goodbyes_in_flight_ = 0;  // destructor: goodbye sends not yet finished
  // Received messages' requests, freed at the next post_recv rather than in their
  // callback: ucp_request_free there sat between a message's arrival and the
  // caller's answer (in-run A/B: 3-7 ns a round trip). At most kSpentRequests.
  static constexpr size_t kSpentRequests = 16;
  std::vector<void*> spent_;
};

}  // namespace thd::detail::ucx
