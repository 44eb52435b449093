// The interface a DataChannel backend implements: tagged point-to-point messages
// between world ranks, with MPI's matching rules. Groups, argument checking,
// tensors and collectives live above it (DataChannel, collectives/), written once.
//
// Contract for implementations:
// - post_send/post_recv never block and never throw for network trouble: problems
//   fail the request (RequestState::fail) with the right thd error.
// - Matching: a receive matches the oldest unmatched message from `src` (or any
//   source) with the same context and tag. Messages between two ranks with the
//   same (context, tag) match in send order. Before writing any payload byte, the
//   transport checks the message with check_match() and fails the receive with
//   that error (discarding the payload) when it does not agree.
// - A message that arrives before its receive is posted is kept (backends may
//   bound how much they keep per peer and stop reading beyond that).
// - A peer that is lost (connection closed or reset, or the backend's own failure
//   detection) fails every pending request that needs it and every later one with
//   thd::PeerLost naming its rank; peer_error() reports it from then on.
// - The memory a request points at stays valid until it is finished; the request's
//   keepalive holds what guarantees that.
// - Every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <atomic>
#include <string_view>
#include <vector>

#include <thd/datachannel.h>

#include "datachannel/envelope.h"
#include "datachannel/request_state.h"

namespace thd::detail {

class DeviceCollectives;  // datachannel/device_collectives.h
class HostCollectives;    // datachannel/host_collectives.h

// Makes the request of a send_blocking that has to be waited for; a function
// pointer and its context, so that the common case, which makes none, costs
// nothing to set up.
struct RequestMaker {
  std::shared_ptr<RequestState> (*make)(const void* context);
  const void* context;
  std::shared_ptr<RequestState> operator()() const { return make(context); }
};

class Transport {
 public:
  Transport(int rank, int size);
  virtual ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  virtual std::string_view name() const noexcept = 0;

  // dst: a world rank other than rank() is not required: a rank may message itself.
  virtual void post_send(std::span<const uint8_t> data, int dst, const Envelope& envelope,
                         const std::shared_ptr<RequestState>& request) = 0;
  // A send whose request is made only if it is needed (DataChannel's send and
  // send_bytes, which wait at once, and isend, which makes a finished request
  // after the send): returns nullptr when the message left within the call;
  // otherwise the request (made by `make_request`) to wait for, which may already
  // be finished or failed. The default posts a request. Backends that can often
  // finish a small send at once override it: a request made, finished and dropped
  // per message was a measurable part of a small round trip.
  virtual std::shared_ptr<RequestState> send_blocking(std::span<const uint8_t> data, int dst, const Envelope& envelope,
                                                      const RequestMaker& make_request);
  // A small message handed to the library to leave within the call: true when it
  // left; false when it did not, with nothing done (the caller then takes
  // send_blocking). What DataChannel's blocking sends and isend try first, before
  // they set up send_blocking's request maker: a message's answer waits for every
  // instruction between a receive's return and the send. The default sends
  // nothing.
  virtual bool send_now(std::span<const uint8_t> /*data*/, int /*dst*/, const Envelope& /*envelope*/) {
    return false;
  }
  // src: a world rank or kAnySource. The request completes with the source rank
  // and data.size() bytes.
  virtual void post_recv(std::span<uint8_t> data, int src, const Envelope& envelope,
                         const std::shared_ptr<RequestState>& request) = 0;
  // A receive its caller waits for at once (DataChannel::recv_bytes, recv): posts
  // it, waits until it finishes or its deadline passes (then withdraws it), and
  // returns the world rank it came from; throws the request's error. The default
  // posts a request made from `spec` and waits on it. Backends override it to keep
  // the request on the stack: a request allocated, shared and dropped per message
  // was a measurable part of a small round trip.
  virtual int recv_blocking(std::span<uint8_t> data, int src, const Envelope& envelope, const RequestSpec& spec);

  // Withdraws a pending request and fails it with `why` (a waiter calls this when
  // the request's deadline passed). Afterwards the transport no longer touches the
  // request's memory: a receive not yet matched is unposted, a receive mid-payload
  // discards the rest; a send already on the wire is finished from the request's
  // keepalive or, when it cannot be, the connection to that peer is closed. A
  // finished request is left alone.
  virtual void cancel(const std::shared_ptr<RequestState>& request, std::exception_ptr why) = 0;

  // Waits until `request` is finished or `until` passes; true if finished. The
  // default blocks on the request; backends override it to spin on their own
  // progress first (latency) and then block (no core burnt while idle).
  virtual bool wait(RequestState& request, net::Deadline until);
  // wait() until the request's own deadline. The default fixes a deadline the
  // request's call left open (RequestSpec::timeout_from_wait) at once; a transport
  // that spins first overrides it to fix it at its first clock read, which a short
  // wait never reaches.
  virtual bool wait_own(RequestState& request) { return wait(request, request.deadline()); }
  // Bracket a sleep of a thread that waits for this transport's requests without
  // driving it and without blocking on one request (a collective engine lane with
  // tasks suspended on their messages). Meanwhile the transport's own progress
  // serves its requests at once, as it does for a waiter blocked in wait(), rather
  // than standing down as it does after a waiter that drives progress itself. The
  // default does nothing: for transports whose progress never stands down.
  virtual void begin_external_wait() noexcept {}
  virtual void end_external_wait() noexcept {}

  // The PeerLost error of a world rank this transport has lost, nullptr while it
  // is healthy.
  virtual std::exception_ptr peer_error(int world_rank) const = 0;
  // True when that rank closed its channel on purpose, having finished (it said
  // goodbye before its connection ended), rather than dying. A collective may go
  // on without a member that departed once it is done with it: the last rank out
  // of a barrier may leave while others still wait for each other. Backends that
  // cannot tell say false, so a departure reads as a loss.
  virtual bool peer_departed(int /*world_rank*/) const { return false; }
  // More ranks of the job on this host than it has cores, as far as the backend
  // knows: message count then costs more than message latency (every message is
  // CPU that another rank's work waits for). False where the backend cannot tell.
  virtual bool oversubscribed() const noexcept { return false; }
  // The collectives this backend runs natively on device (CUDA) tensors (the nccl
  // backend's), nullptr when it has none: the DataChannel then uses the library
  // the build has for them (make_device_collectives, backends.h).
  virtual DeviceCollectives* device_collectives() noexcept { return nullptr; }
  // The collectives this backend's library runs on host memory where they beat
  // thd's own algorithms (the mpi backend's), nullptr when it has none.
  virtual HostCollectives* host_collectives() noexcept { return nullptr; }

  // Counted by the callers of post_send/post_recv (thd::stats).
  void count_send(size_t bytes) noexcept {
    sent_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    sent_messages_.fetch_add(1, std::memory_order_relaxed);
  }
  void count_recv(size_t bytes) noexcept {
    received_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    received_messages_.fetch_add(1, std::memory_order_relaxed);
  }
  // Transports of this process not yet destroyed. A process must not exit with
  // one alive: its threads would drive the backend's library while that library's
  // exit handlers tear it down (the worker's exit path checks this in the tests).
  static int live_count() noexcept;

  ChannelTraffic traffic() const noexcept {
    return {sent_bytes_.load(std::memory_order_relaxed), received_bytes_.load(std::memory_order_relaxed),
            sent_messages_.load(std::memory_order_relaxed), received_messages_.load(std::memory_order_relaxed)};
  }

 private:
  int rank_;
  int size_;
  std::atomic<uint64_t> sent_bytes_{0};
  std::atomic<uint64_t> received_bytes_{0};
  std::atomic<uint64_t> sent_messages_{0};
  std::atomic<uint64_t> received_messages_{0};
};

// How a backend is made: the world's rank and size, the store under a prefix of
// its own, the token and the timeouts are in `options`.
using TransportFactory = std::function<std::shared_ptr<Transport>(const DataChannelOptions& options)>;

}  // namespace thd::detail
