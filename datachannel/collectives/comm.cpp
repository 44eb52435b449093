#include "datachannel/collectives/comm.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "datachannel/channel_access.h"
#include "datachannel/check.h"
#include "datachannel/collective_engine.h"

namespace thd::detail {

namespace {

// How often a waiting rank looks for lost members: a dead rank is noticed this
// fast even by ranks that wait on someone else.
constexpr auto kLivenessSlice = std::chrono::milliseconds(50);

}  // namespace

Comm::Comm(Transport& transport, const std::vector<int>& world_ranks, int rank, Envelope envelope,
           net::Deadline deadline, std::string op)
    : transport_(transport),
      world_ranks_(world_ranks),
      rank_(rank),
      envelope_(envelope),
      deadline_(deadline),
      op_(std::move(op)),
      on_engine_(CollectiveEngine::on_task()) {}

Comm::~Comm() {
  bool unfinished = false;
  for (const InFlight& f : in_flight_) unfinished = unfinished || !f.state->finished();
  if (!unfinished) return;
  try {
    THD_THROW_AT(Error, op_, transport_.rank(), -1,
                 "the collective ended before this message finished, so it was withdrawn");
  } catch (...) {
    cancel_in_flight(std::current_exception());
  }
}

int Comm::world_rank(int peer) const { return world_ranks_[static_cast<size_t>(peer)]; }

std::shared_ptr<RequestState> Comm::new_request(std::string_view what, int peer) {
  const int world = world_rank(peer);
  std::string text = world == peer ? fmt::format("{}: {} rank {}", op_, what, peer)
                                   : fmt::format("{}: {} rank {} (world rank {})", op_, what, peer, world);
  auto state = std::make_shared<RequestState>(std::move(text), deadline_, &transport_, transport_.rank());
  // On the collective engine, finishing it resumes this call.
  state->on_finish = on_engine_ ? CollectiveEngine::finish_lane() : 0;
  if (in_flight_.size() >= prune_at_) {
    std::erase_if(in_flight_, [](const InFlight& f) { return f.state->finished(); });
    // Many still in flight (an algorithm that posts a whole pipeline at once):
    // prune less often so the pruning stays linear overall.
    if (in_flight_.size() * 2 >= prune_at_) prune_at_ *= 2;
  }
  in_flight_.push_back({state, peer});
  return state;
}

Request Comm::isend(std::span<const uint8_t> data, int peer) {
  auto state = new_request("send to", peer);
  transport_.count_send(data.size());
  transport_.post_send(data, world_rank(peer), envelope_, state);
  return Request(std::move(state));
}

Request Comm::irecv(std::span<uint8_t> data, int peer) {
  auto state = new_request("recv from", peer);
  transport_.count_recv(data.size());
  transport_.post_recv(data, world_rank(peer), envelope_, state);
  return Request(std::move(state));
}

void Comm::wait(const Request& request) {
  const std::shared_ptr<RequestState>& state = detail::state_of(request);
  if (!state) return;
  while (!state->finished()) {
    const auto now = net::Clock::now();
    if (now >= deadline_) throw_timeout(*state);
    const auto until = std::min(deadline_, now + kLivenessSlice);
    // On the engine the call suspends and its lane runs other collectives meanwhile;
    // on the caller's own thread it waits as any receive does.
    if (on_engine_ ? CollectiveEngine::await(*state, until) : transport_.wait(*state, until)) break;
    throw_if_member_lost(*state);
    throw_if_told_of_mismatch();
  }
  if (state->status() == RequestState::Failed) {
    tell_members_of_mismatch(state->error);
    fail_call(state->error);
  }
}

void Comm::wait_all(std::span<const Request> requests) {
  for (const Request& r : requests) wait(r);
}

void Comm::sendrecv(std::span<const uint8_t> send_data, int dst, std::span<uint8_t> recv_data, int src) {
  Request r = irecv(recv_data, src);
  Request s = isend(send_data, dst);
  wait(r);
  wait(s);
}

int Comm::peer_of(const RequestState& state) const {
  for (const InFlight& f : in_flight_) {
    if (f.state.get() == &state) return f.peer;
  }
  return -1;
}

void Comm::throw_if_member_lost(const RequestState& waiting) {
  for (size_t i = 0; i < world_ranks_.size(); ++i) {
    const int world = world_ranks_[i];
    std::exception_ptr lost = transport_.peer_error(world);
    // A member that said goodbye had finished its part of this collective; waits on
    // it directly still fail, through the transport.
    if (!lost || transport_.peer_departed(world)) continue;
    std::string cause;
    try {
      std::rethrow_exception(lost);
    } catch (const std::exception& e) {
      cause = e.what();
    } catch (...) {
      cause = "unknown error";
    }
    try {
      THD_THROW_AT(PeerLost, op_, transport_.rank(), world,
                   "rank {} of the group (world rank {}) was lost while {} was pending, so the collective "
                   "cannot finish: {}",
                   i, world, waiting.op, cause);
    } catch (...) {
      fail_call(std::current_exception());
    }
  }
}

void Comm::throw_if_told_of_mismatch() {
  if (!notice_) {
    auto state = std::make_shared<RequestState>(fmt::format("{}: mismatch notice", op_), deadline_, &transport_,
                                                transport_.rank());
    in_flight_.push_back({state, -1});
    notice_ = std::move(state);
    transport_.post_recv(notice_bytes_, kAnySource, mismatch_notice_envelope(envelope_), notice_);
  }
  // A notice that could not be taken (a peer lost, a malformed message) tells
  // nothing: the call goes on waiting for its own messages.
  if (notice_->status() != RequestState::Done) return;
  fail_call(noticed_mismatch(transport_.rank(), notice_->source, envelope_, decode_mismatch_notice(notice_bytes_)));
}

void Comm::tell_members_of_mismatch(const std::exception_ptr& error) noexcept {
  const std::optional<CollectiveMismatch> found = collective_mismatch_of(error);
  if (!found) return;
  try {
    const Envelope envelope = mismatch_notice_envelope(envelope_);
    const MismatchNoticeBytes bytes = encode_mismatch_notice({envelope_.kind, found->peer, found->theirs});
    for (int peer = 0; peer < size(); ++peer) {
      const int world = world_rank(peer);
      if (peer == rank_ || transport_.peer_error(world)) continue;
      auto state = std::make_shared<RequestState>(fmt::format("{}: mismatch notice to rank {}", op_, peer), deadline_,
                                                  &transport_, transport_.rank());
      // Nobody waits for it: the request keeps its bytes until the transport is done.
      Tensor payload = Tensor::empty({static_cast<int64_t>(bytes.size())}, kUInt8);
      std::memcpy(payload.data_ptr(), bytes.data(), bytes.size());
      const std::span<const uint8_t> data{static_cast<const uint8_t*>(payload.data_ptr()), bytes.size()};
      state->keepalive.push_back(std::move(payload));
      transport_.post_send(data, world, envelope, state);
    }
  } catch (...) {
    // Out of memory: the members not told fail at their deadline instead.
  }
}

void Comm::throw_timeout(const RequestState& waiting) {
  throw_if_told_of_mismatch();
  const int peer = peer_of(waiting);
  try {
    THD_THROW_AT(TimeoutError, op_, transport_.rank(), peer >= 0 ? world_rank(peer) : -1,
                 "{} did not finish before the collective's deadline: rank {} never got there (is it "
                 "running a different collective, or stuck?)",
                 waiting.op, peer);
  } catch (...) {
    fail_call(std::current_exception());
  }
}

void Comm::fail_call(std::exception_ptr why) {
  cancel_in_flight(why);
  std::rethrow_exception(why);
}

void Comm::cancel_in_flight(const std::exception_ptr& why) noexcept {
  for (const InFlight& f : in_flight_) {
    if (f.state->finished()) continue;
    try {
      transport_.cancel(f.state, why);
    } catch (...) {
      // Out of memory inside a transport: the request fails on its own deadline.
    }
  }
  in_flight_.clear();
}

}  // namespace thd::detail
