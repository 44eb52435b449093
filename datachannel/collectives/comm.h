// One collective call's view of its group, for the algorithms in this folder:
// group ranks, and messages that carry the call's envelope (so every message is
// checked against what the receiver runs) and share the call's deadline.
#pragma once

#include <thd/datachannel.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "datachannel/collectives/mismatch_notice.h"
#include "datachannel/envelope.h"
#include "datachannel/net/socket.h"
#include "datachannel/transport.h"

namespace thd::detail {

class Comm {
 public:
  // world_ranks[i] is group rank i; rank is this process's group rank. The
  // transport and world_ranks must outlive the Comm.
  Comm(Transport& transport, const std::vector<int>& world_ranks, int rank, Envelope envelope, net::Deadline deadline,
       std::string op);
  // Withdraws every message of this call still in flight (an algorithm that
  // threw), so the transport never touches the call's buffers afterwards.
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return static_cast<int>(world_ranks_.size()); }
  const std::string& op() const noexcept { return op_; }
  net::Deadline deadline() const noexcept { return deadline_; }
  const Envelope& envelope() const noexcept { return envelope_; }
  const std::vector<int>& world_ranks() const noexcept { return world_ranks_; }
  Transport& transport() const noexcept { return transport_; }

  // One message of this call to / from a group rank. Messages between two ranks
  // in one call match in the order they are posted.
  Request isend(std::span<const uint8_t> data, int peer);
  Request irecv(std::span<uint8_t> data, int peer);

  // Waits for the request within the call's deadline and rethrows its error.
  // Fails early with PeerLost when any member of the group is lost, since a
  // collective cannot finish without every member, and with the mismatch another
  // member told this rank of (mismatch_notice.h). When the request itself failed
  // with a mismatch, first tells every other member. Before it throws, every
  // message of this call still in flight is withdrawn (the buffers of a failed
  // collective are the caller's again). A default Request returns at once.
  void wait(const Request& request);
  void wait_all(std::span<const Request> requests);

  void send(std::span<const uint8_t> data, int peer) { wait(isend(data, peer)); }
  void recv(std::span<uint8_t> data, int peer) { wait(irecv(data, peer)); }
  // Both at once (receive posted first), as MPI_Sendrecv: deadlock-free in rings.
  void sendrecv(std::span<const uint8_t> send_data, int dst, std::span<uint8_t> recv_data, int src);

 private:
  struct InFlight {
    std::shared_ptr<RequestState> state;
    int peer;  // group rank
  };

  std::shared_ptr<RequestState> new_request(std::string_view what, int peer);
  int world_rank(int peer) const;
  void throw_if_member_lost(const RequestState& waiting);
  [[noreturn]] void throw_timeout(const RequestState& waiting);
  // Cancels every unfinished message of this call with `why` and throws it.
  [[noreturn]] void fail_call(std::exception_ptr why);
  void cancel_in_flight(const std::exception_ptr& why) noexcept;
  // Once a wait lasted a liveness slice: posts the receive for a mismatch notice
  // (the first time), and fails the call when one came.
  void throw_if_told_of_mismatch();
  // Sends every other member a notice of the mismatch `error` names, if it is one.
  void tell_members_of_mismatch(const std::exception_ptr& error) noexcept;
  int peer_of(const RequestState& state) const;

  Transport& transport_;
  const std::vector<int>& world_ranks_;
  int rank_;
  Envelope envelope_;
  net::Deadline deadline_;
  std::string op_;
  // Whether the call runs as a task of the collective engine (an async collective)
  // rather than on its caller's thread.
  bool on_engine_;
  // The messages posted and not yet seen finished; pruned as it grows, so its
  // size stays near the number actually in flight.
  std::vector<InFlight> in_flight_;
  size_t prune_at_ = 64;
  // The receive for a mismatch notice, posted once a wait has lasted a slice.
  std::shared_ptr<RequestState> notice_;
  MismatchNoticeBytes notice_bytes_{};
};

}  // namespace thd::detail
