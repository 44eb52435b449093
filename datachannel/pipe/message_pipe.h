// The layer under the message-library backends (mpi, ucx, libfabric): a pipe that
// moves tagged byte messages between the ranks of a world, with the library's own
// matching on (peer, tag) only. Everything thd's Transport contract asks beyond that
// (MPI matching on (context, 64-bit tag), checking a message's kind and size before
// a payload byte lands, unexpected messages, cancel, self-sends, deadlines) is
// written once, in PipeTransport (pipe_transport.h), over any MessagePipe.
// A pipe whose library matches 64-bit tags itself may also offer that matching
// for the envelopes that fit its tag, point-to-point and collective ("matching by
// the library itself" below), which PipeEngine then uses for them.
//
// How PipeTransport uses a pipe: tag kControlTag carries fixed-size control
// messages (a header, and small payloads inline); every other tag, 1..max_tag(),
// carries one large payload, received straight into the receive's memory (the
// library's own rendezvous makes that zero-copy). Each peer always has one control
// receive posted.
//
// Threading: PipeTransport calls every method except interrupt() and sleep() under
// one lock of its own, so a pipe needs no locking of its own for them (the library
// may run single-threaded: UCS_THREAD_MODE_SINGLE, FI_THREAD_DOMAIN, or MPI's
// calls serialized). interrupt() may be called from any thread at any time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "datachannel/envelope.h"
#include "datachannel/pipe/native_arrival.h"
#include "datachannel/net/socket.h"

namespace thd::detail {
class HostCollectives;  // datachannel/host_collectives.h
}

namespace thd::detail::pipe {

inline constexpr uint32_t kControlTag = 0;

// One operation handed to a pipe. PipeTransport owns it and keeps it alive until
// the pipe calls done() (or cancel() returned true).
class PipeOp {
 public:
  virtual ~PipeOp() = default;
  // Called by the pipe, from progress() (or from send/recv when the library
  // completes the op at once), exactly once: `error` is null on success; `bytes`
  // is the length of the message a receive got (<= its buffer) or what a send sent.
  // On failure the error names the peer (thd::PeerLost when it is gone). It may run
  // inside the library's own callback, so it must not call the pipe: it records
  // the outcome for later (PipeTransport's queues it for settle()).
  virtual void done(std::exception_ptr error, size_t bytes) noexcept = 0;
};

class MessagePipe {
 public:
  MessagePipe(int rank, int size) : rank_(rank), size_(size) {}
  virtual ~MessagePipe() = default;
  MessagePipe(const MessagePipe&) = delete;
  MessagePipe& operator=(const MessagePipe&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  // The backend's name ("ucx"), for errors.
  virtual std::string_view name() const noexcept = 0;

  // The largest tag this pipe can match on (at least 2^15 - 1, MPI's minimum).
  virtual uint32_t max_tag() const noexcept = 0;

  // Starts sending `data` to `peer` (never this rank) with `tag`. `data` stays
  // valid until op->done(). Messages to one peer with one tag are matched in the
  // order they were sent. Never throws for network trouble: the op fails.
  virtual void send(int peer, uint32_t tag, std::span<const uint8_t> data, PipeOp* op) = 0;
  // Sends a small message only if the library takes it whole inside this call
  // (copied out, nothing left to complete): true when it did; false when it would
  // have had to queue it, or the peer is unhealthy, and then nothing was sent and
  // send() is the way (it also reports what is wrong). `data` is not used after
  // the call returns, and no done() comes. Ordered with send() like any send.
  // Pipes without such a path return false.
  virtual bool send_at_once(int /*peer*/, uint32_t /*tag*/, std::span<const uint8_t> /*data*/) { return false; }
  // Starts receiving the next message from `peer` with exactly `tag` into `data`.
  // A longer message fails the op (ValueError naming the sizes) or, where the
  // library cannot tell, is truncated with the op failed; never an overrun.
  virtual void recv(int peer, uint32_t tag, std::span<uint8_t> data, PipeOp* op) = 0;
  // Whether recv() into a buffer shorter than the message keeps to the buffer (the
  // op fails, nothing is written past it). Open MPI's shared-memory transport
  // (vader) copies a large message's whole length with its single-copy get, so
  // the mpi pipe says false, and a payload PipeTransport discards is then received
  // into a buffer of its full size.
  virtual bool truncates_safely() const noexcept { return true; }
  // Withdraws a pending op: true when the pipe will not touch its memory again nor
  // call done() for it; false when it can no longer be withdrawn (the library has
  // matched it): done() will still come.
  virtual bool cancel(PipeOp* op) = 0;
  // Stops reporting to `op`, which cancel() could not withdraw and whose owner
  // cannot wait for it any longer: done() is never called for it, and the library
  // keeps what it still holds until it lets go. Pipes whose library never holds
  // an op past its peer's loss need do nothing.
  virtual void forget(PipeOp* /*op*/) noexcept {}

  // Completes what the library has finished, calling done(); returns how many
  // ops completed (0 when nothing happened).
  virtual int progress() = 0;
  // Gets ready for sleep(): false when there may be work for progress() right now
  // (call it again before sleeping), true when sleep() may block until the library
  // has something (e.g. ucp_worker_arm, fi_trywait).
  virtual bool arm() = 0;
  // Called without PipeTransport's lock after arm() returned true: blocks until the
  // library may have work, interrupt() was called, or `until` passes. Only one
  // thread sleeps at a time. Pipes without a wait object poll here with a short
  // sleep: `busy` says a transfer is in flight (poll often) or not (back off).
  virtual void sleep(net::Deadline until, bool busy) = 0;
  // Ends a sleep() now, or makes the next one return at once.
  virtual void interrupt() noexcept = 0;

  // The error of a peer the library reports lost (thd::PeerLost), null while it is
  // healthy or when the library cannot tell.
  virtual std::exception_ptr peer_error(int peer) const = 0;
  // True when the peer's loss was its goodbye (it closed its pipe having finished),
  // not a failure; see Transport::peer_departed.
  virtual bool peer_departed(int /*peer*/) const { return false; }
  // The transport found `peer` lost by its own means (the process watch, a
  // heartbeat timeout, a refused token proof, a cut-off): the pipe lets go of it as
  // if the library had reported it lost. Its pending sends and receives with it
  // end with done() and thd::PeerLost by the next progress() (a send to a dead
  // peer may otherwise stay in the library's hands until the library's own
  // detection, and a receive the library matches by tag never ends), and later
  // ops with it fail at once, except a receive of a message already here. `why`
  // is the reason as a sentence. Pipes whose library cannot let go of a peer
  // ignore it.
  virtual void peer_lost(int /*peer*/, std::string_view /*why*/) {}
  // Whether the library notices a peer that dies without a word (a killed process)
  // by itself. When it does not (libfabric's tcp and shm providers), PipeTransport
  // sends heartbeats and declares a silent peer lost.
  virtual bool detects_silent_peer_loss() const noexcept { return true; }
  // The library's own host collectives (Transport::host_collectives), if it has
  // some worth using. They are called outside PipeTransport's lock.
  virtual HostCollectives* host_collectives() noexcept { return nullptr; }

  // ---- matching by the library itself (optional) ----
  // A pipe whose library matches 64-bit tags packs the envelopes that fit into its
  // tag (point-to-point ones, and collective ones where it can); PipeEngine then
  // sends and receives those messages with the calls below, not on the control
  // tag, and the library matches them (docs/backends.md).
  // Whether this pipe offers it (false: the calls below are never made).
  virtual bool matches_natively() const noexcept { return false; }
  // The tag a message with `envelope` from `sender` is sent with; nullopt when it
  // does not fit (it then travels as a control message, as every message of its
  // (context, tag) does).
  virtual std::optional<uint64_t> native_tag(const Envelope& /*envelope*/, int /*sender*/) const {
    return std::nullopt;
  }
  // A receive's tag and mask for `envelope` from `source` (kAnySource allowed):
  // for envelopes native_tag() packs. The kind bits are left out of the mask.
  struct NativeMatch {
    uint64_t tag = 0;
    uint64_t mask = 0;
  };
  virtual NativeMatch native_match(const Envelope& /*envelope*/, int /*source*/) const { return {}; }
  // What a received message's tag says: its sender and its dtype (a thd DType
  // value, or detail::kRawBytes).
  struct NativeOrigin {
    int sender = -1;
    uint8_t dtype = detail::kRawBytes;
  };
  virtual NativeOrigin native_origin(uint64_t /*tag*/) const { return {}; }
  // The envelope a message of `bytes` with tag `tag` that matched a receive posted
  // with `posted` came with (what a mismatch is named with): a point-to-point
  // message's kind is its dtype and element count; a pipe that packs collectives
  // too (pipe/collective_tag.h) says theirs.
  virtual Envelope native_envelope(const Envelope& posted, uint64_t tag, size_t bytes) const {
    return native_arrival(posted, native_origin(tag).dtype, bytes);
  }
  // Sends to `peer` (this rank included) with the whole tag `tag`; as send().
  virtual void send_tagged(int /*peer*/, uint64_t /*tag*/, std::span<const uint8_t> /*data*/, PipeOp* /*op*/) {}
  // send_at_once() with the whole tag `tag`.
  virtual bool send_tagged_at_once(int /*peer*/, uint64_t /*tag*/, std::span<const uint8_t> /*data*/) {
    return false;
  }
  // Receives the next message matching (tag, mask) into `data`; `peer` is the
  // one sender the mask admits (its loss fails the receive) or -1 for any. The
  // message's tag is written to *sender_tag before op->done(); a message longer
  // than `data` fails it with done()'s `bytes` its length, nothing written past
  // `data`.
  virtual void recv_tagged(int /*peer*/, uint64_t /*tag*/, uint64_t /*mask*/, std::span<uint8_t> /*data*/,
                           uint64_t* /*sender_tag*/, PipeOp* /*op*/) {}
  // The tag and length of the message recv_tagged(tag, mask) would take next,
  // left in place; nullopt when none is here.
  struct Probed {
    uint64_t tag = 0;
    size_t length = 0;
  };
  virtual std::optional<Probed> probe_tagged(uint64_t /*tag*/, uint64_t /*mask*/) { return std::nullopt; }

  // ---- the direct path for small blocking messages (optional) ----
  // A pipe that matches natively may also take a blocking send or receive of a
  // point-to-point message from PipeTransport straight (its direct path,
  // docs/backends.md), packing the envelope into its tag itself: the general
  // calls above cost a virtual call and a packing of their own each. Whether it
  // does (false: the two calls below are never made).
  virtual bool offers_direct() const noexcept { return false; }
  // send_tagged_at_once() of a message with `envelope` from this rank to `peer`
  // (another rank, healthy as far as the caller knows): true when it left whole
  // within the call; false, with nothing sent, when the envelope does not fit the
  // tag or the library would have had to queue it.
  virtual bool send_direct(int /*peer*/, const Envelope& /*envelope*/, std::span<const uint8_t> /*data*/) {
    return false;
  }
  // What recv_direct tells its caller of tags: `expected`, the tag a message of
  // exactly the receive's envelope from its peer carries, written before the
  // receive is posted (0: the pipe gives none); `arrived`, the message's own tag,
  // written before op->done(). A message whose tag is the expected one needs no
  // decoding (native_origin) to be checked.
  struct DirectTags {
    uint64_t expected = 0;
    uint64_t arrived = 0;
  };
  // recv_tagged() of the next message with `envelope` from `peer` (another rank),
  // with `tags` filled as above: true when posted; false, with nothing posted,
  // when the envelope does not fit the tag.
  virtual bool recv_direct(int /*peer*/, const Envelope& /*envelope*/, std::span<uint8_t> /*data*/,
                           DirectTags* /*tags*/, PipeOp* /*op*/) {
    return false;
  }

 private:
  int rank_;
  int size_;
};

}  // namespace thd::detail::pipe
