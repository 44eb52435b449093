// The tcp backend's Transport: the mesh's sockets, driven by one epoll engine
// (docs/backend_tcp.md has the whole design).
//
// Threading. One engine lock (mu_) guards every socket, queue and match list.
// Whoever holds it makes progress: the progress thread (an epoll loop), a thread
// posting a send (it writes at once when the peer's queue is empty, saving a
// wake-up), or a thread in wait(). A waiter first spins, if the spin policy says
// it pays (it try-locks the engine and tries the sockets itself); then a waiter
// that blocks becomes the poller, blocking in epoll_wait itself, so the message it
// waits for wakes it directly; the newest such waiter takes the poll over from an
// older one (often a long-lived listener), which then blocks on its request. While a waiter spins or polls the
// progress thread stands down (it parks instead of taking the lock), so two
// threads never fight over the same events; when the last driving waiter leaves
// and others are blocked, the progress thread takes over at once.
// Nothing holds the lock across a blocking call: every socket is nonblocking.
//
// Receive path per peer: a 64 KiB read buffer for headers and small payloads;
// larger payloads are read straight into the posted receive's memory (or the
// unexpected message's buffer). Messages of rendezvous_bytes or more are
// announced first and their payload sent only once a receive has matched them, so
// they are never buffered: they go from the sender's memory to the receiver's. Send path per peer: a queue of frames written with
// sendmsg() over an iovec of (header, payload) pairs straight from the caller's
// memory, as many queued frames per call as fit, so small messages that pile up
// go out together.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "datachannel/net/fd.h"
#include "datachannel/matching.h"
#include "datachannel/tcp/mesh.h"
#include "datachannel/spin_policy.h"
#include "datachannel/small_header.h"
#include "datachannel/wire.h"
#include "datachannel/transport.h"

struct epoll_event;

namespace thd::detail::tcp {

// Below this a message goes whole: the round trip of a rendezvous would cost more
// than buffering it at the receiver.
inline constexpr size_t kDefaultRendezvousBytes = size_t{1} << 20;
// Past this much a peer's messages wait in its socket: nothing is lost, and its
// sends wait (flow control), so there is no need to hold more.
inline constexpr size_t kDefaultUnexpectedLimit = size_t{256} << 20;
// SO_SNDBUF and SO_RCVBUF of every connection when all ranks are on this host (the
// kernel doubles it for its bookkeeping). Loopback needs no window for a long
// path, and the bytes in flight are buffers the kernel writes and reads again:
// with the kernel's autotuning (up to 4 MiB sent and 32 MiB received per
// connection) they fall out of the caches, and a 64 MiB all_reduce of 4 ranks on
// 2 cores takes about a third more CPU time than with 1 MiB (docs/backend_tcp.md).
// Used only where net.core.wmem_max and rmem_max allow it unclamped.
inline constexpr size_t kLoopbackSocketBufferBytes = size_t{1} << 20;

// The knobs of one transport; make_transport fills them from the defaults and the
// environment, tests set them directly.
struct Tuning {
  // Unexpected payload bytes buffered per peer before its connection is no longer
  // read (TCP backpressure) until receives take them; a peer that closes its
  // connection meanwhile is cut off (THD_MAX_UNEXPECTED_BYTES).
  size_t unexpected_limit = kDefaultUnexpectedLimit;
  // Messages this large or larger go by rendezvous (THD_TCP_RENDEZVOUS_BYTES):
  // announced, and sent once the receiver has a receive for them.
  size_t rendezvous_bytes = kDefaultRendezvousBytes;
  // SO_SNDBUF and SO_RCVBUF of the connections to the peers
  // (THD_TCP_SOCKET_BUFFER_BYTES); zero leaves them to the kernel's autotuning.
  // kLoopbackSocketBufferBytes on loopback (where the kernel's limits allow it),
  // zero otherwise.
  size_t socket_buffer_bytes = 0;
  // The spin budget (THD_TCP_SPIN_US); zero never spins.
  std::chrono::microseconds spin_budget = kDefaultSpinBudget;
  // More ranks on this host than usable cores: start with spinning paused.
  bool oversubscribed = false;
  // The cores this process may use (its affinity mask).
  int cpus = 1;
  // How long destruction waits for queued sends to reach the kernel.
  std::chrono::milliseconds close_linger{2000};
  // Per incoming connection at set-up.
  std::chrono::milliseconds handshake_timeout = net::kDefaultHandshakeTimeout;
};

// The defaults, THD_TCP_SPIN_US and this host's cores applied for these options.
// ValueError for a malformed THD_TCP_SPIN_US.
Tuning tuning_for(const DataChannelOptions& options, const net::EnvLookup& env = net::process_env);

// make_transport with explicit tuning.
std::shared_ptr<Transport> make_transport(const DataChannelOptions& options, const Tuning& tuning);

class TcpTransport final : public Transport {
 public:
  TcpTransport(int rank, int size, Mesh mesh, const Tuning& tuning);
  // Gives queued sends up to close_linger to leave, stops the progress thread,
  // fails every pending request with ConnectionError("channel closed"), closes.
  ~TcpTransport() override;

  std::string_view name() const noexcept override { return "tcp"; }
  void post_send(std::span<const uint8_t> data, int dst, const Envelope& envelope,
                 const std::shared_ptr<RequestState>& request) override;
  void post_recv(std::span<uint8_t> data, int src, const Envelope& envelope,
                 const std::shared_ptr<RequestState>& request) override;
  void cancel(const std::shared_ptr<RequestState>& request, std::exception_ptr why) override;
  bool wait(RequestState& request, net::Deadline until) override;
  void begin_external_wait() noexcept override;
  void end_external_wait() noexcept override;
  std::exception_ptr peer_error(int world_rank) const override;
  bool peer_departed(int world_rank) const override;
  bool oversubscribed() const noexcept override { return tuning_.oversubscribed; }

  const Tuning& tuning() const noexcept { return tuning_; }
  const SpinPolicy& spin_policy() const noexcept { return spin_; }
  // Payload bytes of unexpected messages from `world_rank` buffered now (never
  // more than tuning().unexpected_limit); for tests and statistics.
  size_t unexpected_bytes(int world_rank) const;
  // SO_SNDBUF and SO_RCVBUF of the connection to `world_rank` as the kernel reports
  // them (twice what was set: the kernel's bookkeeping); zeros for this rank, a
  // lost peer or a failed look-up. For tests and statistics.
  std::pair<size_t, size_t> socket_buffers(int world_rank) const;
  // How often a poller left epoll_wait to spin because a frame began streaming;
  // for tests and statistics.
  uint64_t polls_turned_to_spins() const noexcept { return polls_turned_to_spins_.load(std::memory_order_relaxed); }

 private:
  struct SendOp {
    std::shared_ptr<RequestState> request;  // null for rendezvous control frames
    FrameHeaderBytes header{};
    size_t header_size = kFrameHeaderBytes;  // kSmallHeaderBytes for a small message's
    size_t header_sent = 0;
    std::span<const uint8_t> payload;  // the caller's memory, or `owned`
    size_t payload_sent = 0;
    size_t nbytes = 0;                   // the message's size, for completion
    std::unique_ptr<uint8_t[]> owned;    // the unsent rest of a send cancelled mid-frame
    FrameKind kind = FrameKind::Message;
    uint64_t rendezvous_id = 0;
    std::span<const uint8_t> announced;  // ReadyToSend: the payload, sent once asked for
  };

  // epoll ids besides the peers' ranks.
  static constexpr uint64_t kWakeId = UINT64_MAX;      // stop: written once, never drained
  static constexpr uint64_t kKickId = UINT64_MAX - 1;  // wakes the poller
  // Per peer: headers and small payloads are read through this buffer.
  static constexpr size_t kReadBufferBytes = size_t{64} << 10;

  enum class Rx {
    Header,      // between frames
    IntoRecv,    // the current payload goes to a posted receive
    IntoBuffer,  // ... to an unexpected message's buffer
    Discard,     // ... nowhere (its receive failed or was cancelled)
    Parked,      // an unexpected message with no room to buffer it: not reading
  };

  struct Peer {
    int rank = -1;
    net::Socket socket;
    uint32_t interest = 0;  // the epoll events registered now
    std::exception_ptr lost;
    std::string lost_why;

    std::deque<SendOp> sends;

    Rx rx = Rx::Header;
    std::unique_ptr<uint8_t[]> rbuf;
    size_t rbegin = 0;  // unparsed bytes of rbuf: [rbegin, rend)
    size_t rend = 0;
    FrameHeader frame;                    // the frame being received (rx != Header)
    PostedRecv target;                    // IntoRecv
    size_t target_done = 0;               // IntoRecv: payload bytes in place
    UnexpectedMessage* entry = nullptr;   // IntoBuffer, Parked
    uint64_t discard_left = 0;            // Discard
    size_t buffered = 0;                  // bytes charged for its unexpected messages

    // Rendezvous, sending: announced messages waiting for its ClearToSend, by id.
    uint64_t next_rendezvous_id = 1;
    std::unordered_map<uint64_t, SendOp> announced;
    // Rendezvous, receiving: receives matched to its announcements, waiting for the
    // Data, by its id; a null request discards the data (the receive was cancelled).
    std::unordered_map<uint64_t, PostedRecv> awaiting_data;
  };

  // ---- progress and waiting (progress.cpp) ----
  void progress_loop() noexcept;
  // Parks the progress thread while a waiter drives progress, and for a moment
  // after (the next wait of a ping-pong comes soon).
  void stand_down_while_driven();
  void wake_progress_thread();
  // Handles ready events under mu_; returns the bytes moved. The poller alone may
  // consume its kick.
  size_t dispatch(const epoll_event* events, int n, bool as_poller);
  // One nonblocking pass over the sockets for a spinning waiter; the bytes moved.
  size_t poll_locked();
  // Whether a frame is partly written to or read from a connection (engine lock
  // held): its next bytes come as fast as the peer's side of the stream keeps up.
  bool frame_mid_stream() const;
  // Drives progress from the waiting thread until the request finishes, the
  // budget passes with no byte moved, or the thread is found descheduled.
  SpinPolicy::Outcome spin(RequestState& request, net::Deadline until, std::chrono::nanoseconds budget);
  // Drives progress, yielding the core between polls, for the request's
  // yield_spin; true if it finished.
  bool spin_yielding(RequestState& request, net::Deadline until);
  // How a poll ended: the request finished, the deadline passed, the poll was
  // handed over or failed (block instead), or a frame began streaming through a
  // connection (spin again: it arrives a socket buffer at a time).
  enum class PollEnd { Finished, TimedOut, Block, Streaming };
  // As the poller: blocks in epoll_wait, handling what comes, until the request
  // finishes, `until`, or (when `may_spin`) a frame streams.
  PollEnd poll_until(RequestState& request, net::Deadline until, bool may_spin);
  // Asks the poller to hand the poll to this thread; true once this thread has it.
  bool take_over_polling(net::Deadline until);
  bool block_on(RequestState& request, net::Deadline until);
  void stop_driving();
  // After finishing requests on a thread other than the poller: wakes the poller
  // if its request is done (no socket event would).
  void kick_poller_if_done();
  void drain_kick() noexcept;
  void cancel_locked(const std::shared_ptr<RequestState>& request, std::exception_ptr why);

  // ---- faults ----
  void lose_peer(Peer& p, std::string why, bool warn);
  // Fails the peer's announced sends and the receives waiting for its data.
  void fail_rendezvous(Peer& p, const std::function<std::exception_ptr(const RequestState&)>& why);
  std::exception_ptr lost_error(const Peer& p, const std::string& op) const;
  std::exception_ptr closed_error(const std::string& op) const;

  // ---- I/O (peer_io.cpp), all under mu_ ----
  size_t read_from(Peer& p);
  // After a parked peer may read again: watch its socket, and process what its
  // read buffer already holds.
  void resume_reading(Peer& p);
  size_t write_to(Peer& p);
  // One recv() into the read buffer; false when nothing came (would block, or the
  // peer is lost). *emptied: the read took less than it asked for.
  bool fill_read_buffer(Peer& p, size_t* moved, bool* emptied);
  // Reads the header at the front of the read buffer (a small one or a full one,
  // which is all there) and steps past it; a malformed one loses the peer: false.
  bool read_header(Peer& p, FrameHeader* h);
  void start_frame(Peer& p);
  // The payload bytes the current frame still needs and where they go (null: discard).
  uint64_t payload_left(const Peer& p, uint8_t** dst) const;
  // Counts n payload bytes in place; closes the frame when it is complete.
  void advance_payload(Peer& p, size_t n);
  void finish_frame(Peer& p);
  // A whole frame was written: complete its send, or keep an announcement for its ClearToSend.
  void sent_frame(Peer& p, SendOp& op);
  // ---- rendezvous (peer_io.cpp) ----
  void on_rendezvous_frame(Peer& p, const FrameHeader& h);
  // An announcement met a receive: ask for the data, or decline a mismatch.
  void accept_announcement(Peer& p, const FrameHeader& h, PostedRecv recv);
  void queue_frame(Peer& p, SendOp op);
  void queue_control(Peer& p, FrameKind kind, uint64_t id);
  void receive_into(Peer& p, PostedRecv recv);
  // The current frame's payload goes into `recv`, or nowhere when it has no live
  // request (failed, cancelled).
  void read_payload_into(Peer& p, PostedRecv recv);
  bool try_buffer(Peer& p, UnexpectedMessage& message);
  void release_buffer(Peer& p, size_t bytes);
  void take_unexpected(UnexpectedMessage* message, PostedRecv recv);
  void send_to_self(std::span<const uint8_t> data, const Envelope& envelope,
                    const std::shared_ptr<RequestState>& request);
  void update_interest(Peer& p);
  bool cancel_send(Peer& p, const std::shared_ptr<RequestState>& request, const std::exception_ptr& why);

  const Tuning tuning_;
  SpinPolicy spin_;
  RunQueue run_queue_;

  mutable std::mutex mu_;  // the engine lock
  bool closing_ = false;
  std::vector<Peer> peers_;  // by world rank; this rank's entry unused
  MatchQueues queues_;
  net::UniqueFd epoll_;
  net::UniqueFd wake_;  // written once, at stop: never drained

  // peer_error() without the engine lock: a flag per rank, the error under lost_mu_.
  std::vector<std::atomic<bool>> lost_flags_;
  // Ranks whose Goodbye frame arrived (they closed their channel, having finished).
  std::vector<std::atomic<bool>> departed_flags_;
  mutable std::mutex lost_mu_;
  std::vector<std::exception_ptr> lost_errors_;

  // Who drives progress: the progress thread, unless a waiter does (spinning, or
  // blocked in epoll_wait as the poller).
  std::atomic<bool> stop_{false};
  std::atomic<int> drivers_{0};   // spinners and the poller
  std::atomic<int> blockers_{0};  // waiters blocked on their request, and external waits
  std::atomic<int64_t> last_spin_end_ns_{0};
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  bool handoff_ = false;  // under park_mu_: a waiter blocked, resume now
  std::atomic<bool> poller_active_{false};
  std::atomic<uint64_t> polls_turned_to_spins_{0};
  std::atomic<bool> handover_wanted_{false};  // a newer waiter wants the poll
  std::mutex poll_mu_;
  RequestState* poll_target_ = nullptr;  // under poll_mu_: the poller's request
  net::UniqueFd kick_;                   // wakes the poller; drained by it
  std::atomic<bool> kicked_{false};      // kick_ has been written and not drained
  std::thread progress_;
};

}  // namespace thd::detail::tcp
