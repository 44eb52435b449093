#include "datachannel/pipe/pipe_engine.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

#include "datachannel/check.h"
#include "datachannel/pipe/small_message_header.h"

#include <thd/dtype.h>
#include "tensor/log.h"

namespace thd::detail::pipe {

namespace {

constexpr size_t kHeaderBytes = detail::kFrameHeaderBytes;
// The largest payload send_at_once offers MessagePipe::send_at_once, from a frame on
// its stack. Libraries' short paths take about 100 bytes (UCX's shared memory).
constexpr size_t kAtOnceBytes = 256 - kHeaderBytes;
// The most a discarded payload (one no receive takes) is buffered with.
constexpr uint64_t kMaxDiscardBuffer = 64 * 1024;

// memcpy for the few bytes of a small message without a call into libc: each
// small message is copied twice (into its control message and out of it).
inline void copy_bytes(uint8_t* to, const uint8_t* from, size_t n) noexcept {
  if (n <= 16) {
    if (n >= 8) {
      std::memcpy(to, from, 8);
      std::memcpy(to + n - 8, from + n - 8, 8);
    } else if (n >= 4) {
      std::memcpy(to, from, 4);
      std::memcpy(to + n - 4, from + n - 4, 4);
    } else {
      for (size_t i = 0; i < n; ++i) to[i] = from[i];
    }
    return;
  }
  std::memcpy(to, from, n);
}


}  // namespace

void PipeEngine::EngineOp::done(std::exception_ptr error, size_t bytes) noexcept {
  // The pipe calls this with the owner's lock held (every pipe call is made under it).
  if (kind == Kind::Control && !error && engine->take_inline_message(static_cast<ControlInbox&>(*this), bytes)) {
    return;
  }
  engine->completions_.push_back({this, std::move(error), bytes});
}

bool PipeEngine::parse_control(const ControlInbox& inbox, size_t bytes, detail::FrameHeader* header,
                                  size_t* header_bytes, std::string* why) const {
  const uint8_t* b = inbox.buffer.get();
  if (bytes > 0 && b[0] == kSmallMessageMarker) {
    *header_bytes = kSmallHeaderBytes;
    if (read_small_header(b, bytes, header)) return true;
    *why = bytes < kSmallHeaderBytes
               ? fmt::format("a {}-byte small message (its header is {} bytes)", bytes, kSmallHeaderBytes)
               : fmt::format("a small message with negative tag {}", detail::le::get<int64_t>(b + 8));
    return false;
  }
  *header_bytes = kHeaderBytes;
  if (bytes < kHeaderBytes) {
    *why = fmt::format("a {}-byte control message (a header is {} bytes)", bytes, kHeaderBytes);
    return false;
  }
  if (!detail::decode_frame_header(std::span<const uint8_t, kHeaderBytes>(inbox.buffer.get(), kHeaderBytes), header,
                                why)) {
    return false;
  }
  if (header->kind == detail::FrameKind::Message) {
    if (header->payload_bytes == bytes - kHeaderBytes) return true;
    *why = fmt::format("a message claiming {} payload bytes in a {}-byte control message", header->payload_bytes,
                       bytes);
    return false;
  }
  if (header->kind == detail::FrameKind::ReadyToSend) {
    if (bytes == kHeaderBytes && header->rendezvous_id != 0 && header->rendezvous_id <= max_data_tag_) return true;
    *why = fmt::format("an announcement with data tag {} in a {}-byte control message", header->rendezvous_id, bytes);
    return false;
  }
  *why = fmt::format("a control message of kind {}", static_cast<int>(header->kind));
  return false;
}

bool PipeEngine::take_inline_message(ControlInbox& inbox, size_t bytes) noexcept {
  const int peer = inbox.peer;
  const uint8_t* buffer = inbox.buffer.get();
  // Only a proved peer's well-formed whole message; on_control says what is wrong
  // with anything else, or handles it. No error text is made here: this runs for
  // every small message.
  detail::FrameHeader header;
  if (!proof_.proved(peer)) return false;
  size_t header_bytes = kSmallHeaderBytes;
  if (!read_small_header(buffer, bytes, &header)) {
    if (bytes < kHeaderBytes || !detail::read_frame_header(buffer, &header) ||
        header.kind != detail::FrameKind::Message || header.payload_bytes != bytes - kHeaderBytes) {
      return false;
    }
    header_bytes = kHeaderBytes;
  }
  const bool took = queues_.take_posted_with(peer, header.envelope, [&](detail::PostedRecv& recv) {
    try {
      deliver(peer, header, recv, buffer + header_bytes);
    } catch (...) {
      // Out of memory making a mismatch error: the message is consumed; its receive fails.
      recv.request->fail(std::current_exception());
    }
  });
  if (!took) return false;  // on_control keeps it as unexpected
  inbox.posted = false;
  if (heartbeats_) liveness_.heard(peer, net::Clock::now());
  reposts_.push_back(&inbox);  // room reserved: no allocation here
  return true;
}

PipeEngine::PipeEngine(std::unique_ptr<MessagePipe> pipe, const PipeTuning& tuning, TokenProof& proof,
                       Liveness& liveness, LostPeers& lost)
    : rank_(pipe->rank()),
      size_(pipe->size()),
      name_(pipe->name()),
      tuning_(tuning),
      pipe_(std::move(pipe)),
      max_data_tag_(pipe_->max_tag()),
      proof_(proof),
      liveness_(liveness),
      heartbeats_(liveness.heartbeats()),
      lost_(lost),
      native_(tuning.native_matching && pipe_->matches_natively()),
      inboxes_(static_cast<size_t>(size_)),
      next_data_tag_(static_cast<size_t>(size_), 1),
      unexpected_bytes_(static_cast<size_t>(size_), 0),
      cut_off_(static_cast<size_t>(size_), 0) {
  THD_CHECK(max_data_tag_ >= 2, ValueError, "DataChannel::create", "the {} pipe offers no data tags", name_);
  if (native_) {
    THD_LOG_DEBUG("{} backend (rank {}): messages that fit its tags are matched by the library", name_, rank_);
  }
}

void PipeEngine::open() {
  // An inbox is listed at most once in either: take_inline_message, which runs
  // where the pipe reports a message, must not allocate.
  reposts_.reserve(static_cast<size_t>(size()));
  flushing_.reserve(static_cast<size_t>(size()));
  for (int p = 0; p < size(); ++p) {
    if (p == rank()) continue;
    inboxes_[static_cast<size_t>(p)] = std::make_unique<ControlInbox>(this, p, kHeaderBytes + tuning_.inline_bytes);
    post_control_recv(*inboxes_[static_cast<size_t>(p)]);
  }
}

bool PipeEngine::sends_settled() const {
  for (const auto& [req, m] : sends_) {
    if (m->pending() > 0 && !peer_error(m->peer)) return false;
  }
  return true;
}

void PipeEngine::fail_all() {
  for (auto& r : native_recvs_) {
    if (r->request) r->request->fail(closed_error(r->request->op));
  }
  for (auto& recv : queues_.withdraw_if([](const detail::PostedRecv&) { return true; })) {
    recv.request->fail(closed_error(recv.request->op));
  }
  for (auto& [req, m] : sends_) m->request->fail(closed_error(m->request->op));
  for (auto& [op, d] : data_recvs_) {
    if (d->request) d->request->fail(closed_error(d->request->op));
  }
}

void PipeEngine::close_pipe() noexcept {
  // The pipe withdraws what is still posted; completions it reports now are dropped.
  pipe_.reset();
  completions_.clear();
}

// The first control message of every peer: its proof. Anything else, or a proof
// that does not verify, and the peer is refused.
bool PipeEngine::on_hello(ControlInbox& inbox, size_t bytes) {
  if (proof_.check_hello(inbox.peer, {inbox.buffer.get(), bytes})) return true;
  lose_peer(inbox.peer,
            error_at<AuthError>(name_ + " backend", rank(), inbox.peer, "{}", proof_.refusal(inbox.peer)));
  return false;
}

std::exception_ptr PipeEngine::closed_error(const std::string& op) const {
  return error_at<ConnectionError>(op, rank(), -1, "channel closed (the {} transport was destroyed)", name_);
}

std::exception_ptr PipeEngine::lost_error(int peer, const std::string& op) const { return lost_.error_for(peer, op); }

// ---- posting ------------------------------------------------------------------------

void PipeEngine::post_send(std::span<const uint8_t> data, int dst, const Envelope& envelope,
                              const std::shared_ptr<RequestState>& request) {
  if (closing_) {
    request->fail(closed_error(request->op));
    return;
  }
  if (dst < 0 || dst >= size() || data.size() > detail::kMaxPayloadBytes) {
    request->fail(error_at<ValueError>(request->op, rank(), dst, "cannot send {} bytes to rank {} of a world of {}",
                                       data.size(), dst, size()));
    return;
  }
  if (native_) {
    if (auto tag = pipe_->native_tag(envelope, rank())) {
      if (dst != rank() && peer_error(dst)) {
        request->fail(lost_error(dst, request->op));
        return;
      }
      send_native(*tag, data, dst, request);
      return;
    }
  }
  if (dst == rank()) {
    send_to_self(data, envelope, request);
    return;
  }
  if (peer_error(dst)) {
    request->fail(lost_error(dst, request->op));
    return;
  }
  if (data.size() <= tuning_.inline_bytes) {
    if (send_at_once(data, dst, envelope)) {
      request->complete(-1, data.size());
    } else {
      std::shared_ptr<RequestState> listed = request;
      send_inline(data, dst, envelope, listed, nullptr, nullptr);
    }
    return;
  }
  // An announced message: its header now, its payload on a data tag of its own.
  Outgoing& m = add_send(request, dst);
  uint32_t& next = next_data_tag_[static_cast<size_t>(dst)];
  const uint32_t data_tag = next;
  next = next >= max_data_tag_ ? 1 : next + 1;
  const detail::FrameHeaderBytes header =
      detail::encode_frame_header(envelope, data.size(), detail::FrameKind::ReadyToSend, data_tag);
  m.control.assign(header.begin(), header.end());
  m.set_payload(data, heartbeats_ && !request->keeps_memory());
  m.control_part.pending = true;
  ++transfers_;
  pipe_->send(dst, kControlTag, m.control, &m.control_part);
  m.data_part.pending = true;
  ++transfers_;
  pipe_->send(dst, data_tag, m.payload, &m.data_part);
  flush_reposts();
  settle();
}

bool PipeEngine::send_at_once(std::span<const uint8_t> data, int dst, const Envelope& envelope) {
  if (data.size() > kAtOnceBytes) return false;
  std::array<uint8_t, kHeaderBytes + kAtOnceBytes> frame;  // NOLINT: written before it is read
  const size_t header_bytes = write_message_header(frame.data(), envelope, data.size());
  copy_bytes(frame.data() + header_bytes, data.data(), data.size());
  if (!pipe_->send_at_once(dst, kControlTag, {frame.data(), header_bytes + data.size()})) return false;
  flush_reposts();
  settle();
  return true;
}

bool PipeEngine::send_inline(std::span<const uint8_t> data, int dst, const Envelope& envelope,
                                std::shared_ptr<RequestState>& request, const RequestMaker* make_request,
                                std::exception_ptr* error) {
  // The send is listed in sends_ only if the pipe did not finish it at once: most
  // small sends leave inside pipe_->send (copied out), and listing them cost two
  // hash-map updates on a round trip's latency path.
  SendMap::node_type node = spare_send();
  Outgoing& m = *node.mapped();
  if (request != nullptr) m.request = request;  // a spare record holds none
  m.peer = dst;
  m.nbytes = data.size();
  // A reused record's buffer has the size of its last message, most often this one's.
  const size_t header_bytes = message_header_bytes(envelope);
  if (m.control.size() != header_bytes + data.size()) m.control.resize(header_bytes + data.size());
  write_message_header(m.control.data(), envelope, data.size());
  copy_bytes(m.control.data() + header_bytes, data.data(), data.size());
  m.control_part.pending = true;
  ++transfers_;
  pipe_->send(dst, kControlTag, m.control, &m.control_part);
  flush_reposts();
  settle();
  if (m.pending() == 0) {  // on_send_part finished its request, or left its error
    if (error != nullptr) *error = std::move(m.error);
    recycle_send(std::move(node));
    return true;
  }
  if (request == nullptr) {
    request = (*make_request)();
    m.request = request;
  }
  node.key() = request.get();
  m.listed = true;
  sends_.insert(std::move(node));
  // A peer lost while settling above did not see this send (lose_peer fails the
  // listed ones): its bytes are in the control message, so it fails now.
  if (peer_error(dst)) request->fail(lost_error(dst, request->op));
  return false;
}

void PipeEngine::post_recv(std::span<uint8_t> data, int src, const Envelope& envelope,
                           const std::shared_ptr<RequestState>& request) {
  if (closing_) {
    request->fail(closed_error(request->op));
    return;
  }
  if (src != kAnySource && (src < 0 || src >= size())) {
    request->fail(error_at<ValueError>(request->op, rank(), src, "cannot receive from rank {} of a world of {}", src,
                                       size()));
    return;
  }
  if (native_envelope(envelope, src)) {
    post_native_recv(data, src, envelope, request);
    flush_reposts();
    settle();
    return;
  }
  detail::PostedRecv recv{request, data, src, envelope};
  if (detail::UnexpectedMessage* m = queues_.find_unexpected(src, envelope)) {
    detail::UnexpectedMessage message = std::move(*m);
    queues_.erase_unexpected(m);
    if (message.source != rank()) unexpected_bytes_[static_cast<size_t>(message.source)] -= message.charged;
    deliver(message.source, message.header, recv, message.payload.get(), &message.payload);
  } else if (src != kAnySource && src != rank() && peer_error(src)) {
    request->fail(lost_error(src, request->op));
    return;
  } else {
    queues_.post(std::move(recv));
  }
  // Posting the control receives here takes a message that is already at the
  // library at once (its probe finds it). Leaving them to the caller's next send
  // (so that irecv-then-isend has the re-post after its message) cost the
  // master-worker async dispatch 2.5x: a worker takes a stream of messages, each
  // found by the receive posted for it.
  flush_reposts();
  settle();
}

void PipeEngine::send_to_self(std::span<const uint8_t> data, const Envelope& envelope,
                                 const std::shared_ptr<RequestState>& request) {
  detail::UnexpectedMessage message;
  message.source = rank();
  message.header.envelope = envelope;
  message.header.payload_bytes = data.size();
  if (auto recv = queues_.take_posted(rank(), envelope)) {
    deliver(message.source, message.header, *recv, data.data());
  } else {
    if (!data.empty()) {
      message.payload.reset(new uint8_t[data.size()]);
      std::memcpy(message.payload.get(), data.data(), data.size());
    }
    message.arrived = data.size();
    queues_.add_unexpected(std::move(message));
  }
  request->complete(-1, data.size());
}

void PipeEngine::deliver(int source, const detail::FrameHeader& header, detail::PostedRecv& recv,
                            const uint8_t* payload, std::unique_ptr<uint8_t[]>* adopt) {
  // The common case, kept small enough to inline: an inline message the receive
  // expects.
  if (header.kind == detail::FrameKind::Message && header.envelope.kind == recv.envelope.kind &&
      header.payload_bytes == recv.data.size()) [[likely]] {
    if (!recv.request->finished()) copy_bytes(recv.data.data(), payload, recv.data.size());
    recv.request->complete(source, recv.data.size());
    return;
  }
  deliver_other(source, header, recv, payload, adopt);
}

void PipeEngine::deliver_other(int source, const detail::FrameHeader& header, detail::PostedRecv& recv,
                                  const uint8_t* payload, std::unique_ptr<uint8_t[]>* adopt) {
  const uint64_t bytes = header.payload_bytes;
  const bool whole = header.kind != detail::FrameKind::ReadyToSend;
  std::exception_ptr mismatch = detail::accept_match(rank(), source, recv, header.envelope,
                                                     static_cast<size_t>(bytes), whole ? adopt : nullptr);
  if (header.kind == detail::FrameKind::ReadyToSend) {
    const auto tag = static_cast<uint32_t>(header.rendezvous_id);
    if (mismatch || recv.request->finished()) {
      if (mismatch) recv.request->fail(mismatch);
      receive_payload(source, tag, bytes, nullptr, {});
    } else {
      receive_payload(source, tag, bytes, recv.request, recv.data);
    }
    return;
  }
  if (mismatch) {
    recv.request->fail(mismatch);
    return;
  }
  // A receive of any length may have adopted the payload's buffer as its own.
  if (bytes > 0 && !recv.request->finished() && recv.data.data() != payload) {
    copy_bytes(recv.data.data(), payload, static_cast<size_t>(bytes));
  }
  recv.request->complete(source, static_cast<size_t>(bytes));
}

void PipeEngine::receive_payload(int peer, uint32_t data_tag, uint64_t bytes,
                                    std::shared_ptr<RequestState> request, std::span<uint8_t> into) {
  auto owned = std::make_unique<DataRecv>(this);
  DataRecv& op = *owned;
  op.peer = peer;
  op.expected = static_cast<size_t>(bytes);
  op.request = std::move(request);
  if (!op.request) {
    // The size is the peer's claim: a payload nobody takes goes into a bounded
    // buffer, and a longer one only fails this receive, which still consumes it
    // (MessagePipe::recv). Allocating what a peer announces let one ask for 470 GB
    // (found by tests/fuzz pipe_control).
    uint64_t room = std::min<uint64_t>(bytes, kMaxDiscardBuffer);
    if (!pipe_->truncates_safely()) {
      // Bounded as the messages a peer leaves waiting are.
      if (bytes > tuning_.unexpected_limit) {
        cut_off_[static_cast<size_t>(peer)] = 1;
        lose_peer(peer, error_at<ConnectionError>(
                            std::string(name_) + " backend", rank(), peer,
                            "rank {} sent a message of {} bytes that no receive takes, past the limit of {} per peer "
                            "(THD_MAX_UNEXPECTED_BYTES); it was cut off",
                            peer, bytes, tuning_.unexpected_limit));
        return;
      }
      room = bytes;
    }
    op.discard.resize(static_cast<size_t>(room));
    into = op.discard;
  }
  data_recvs_.emplace(&op, std::move(owned));
  op.pending = true;
  ++transfers_;
  pipe_->recv(peer, data_tag, into, &op);
}

void PipeEngine::post_control_recv(ControlInbox& inbox) {
  if (closing_ && stopped_) return;
  inbox.posted = true;
  pipe_->recv(inbox.peer, kControlTag, {inbox.buffer.get(), inbox.capacity}, &inbox);
}

void PipeEngine::flush_reposts() {
  if (reposts_.empty()) return;
  // A receive the pipe finishes at once may be handled at once
  // (take_inline_message), and add its inbox to reposts_ for the next flush.
  std::swap(reposts_, flushing_);
  for (ControlInbox* inbox : flushing_) {
    if (!stopped_ && !inbox->posted) post_control_recv(*inbox);
  }
  flushing_.clear();
}

// ---- completions --------------------------------------------------------------------

void PipeEngine::settle() {
  if (settling_) return;  // the outer call drains what this one queued
  settling_ = true;
  while (!completions_.empty()) {
    Completion c = std::move(completions_.front());
    completions_.pop_front();
    switch (c.op->kind) {
      case EngineOp::Kind::Control:
        on_control(static_cast<ControlInbox&>(*c.op), std::move(c.error), c.bytes);
        break;
      case EngineOp::Kind::SendPart:
        on_send_part(static_cast<SendPart&>(*c.op), std::move(c.error));
        break;
      case EngineOp::Kind::DataRecv:
        on_data(static_cast<DataRecv&>(*c.op), std::move(c.error), c.bytes);
        break;
      case EngineOp::Kind::NativeRecv:
        on_native(static_cast<NativeRecv&>(*c.op), std::move(c.error), c.bytes);
        break;
    }
  }
  settling_ = false;
}

void PipeEngine::on_control(ControlInbox& inbox, std::exception_ptr error, size_t bytes) {
  inbox.posted = false;
  const int peer = inbox.peer;
  if (error) {
    if (!closing_) lose_peer(peer, error);
    return;
  }
  // Only heartbeats read it; a clock read is a measurable part of a small message.
  if (heartbeats_) liveness_.heard(peer, net::Clock::now());
  if (!proof_.proved(peer)) {
    if (on_hello(inbox, bytes) && !stopped_) post_control_recv(inbox);
    return;
  }
  if (Liveness::is_heartbeat({inbox.buffer.get(), bytes})) {
    if (!stopped_) post_control_recv(inbox);
    return;
  }
  std::string why;
  detail::FrameHeader header;
  size_t header_bytes = 0;
  if (!parse_control(inbox, bytes, &header, &header_bytes, &why)) {
    lose_peer(peer, error_at<ConnectionError>(std::string(name_) + " backend", rank(), peer,
                                              "rank {} sent bytes that are not a thd message: {}", peer, why));
    return;
  }
  const uint8_t* payload = inbox.buffer.get() + header_bytes;
  if (cut_off_[static_cast<size_t>(peer)]) {
    // Read and dropped, with the receive posted again: left unreceived, its
    // messages would pile up in the library's own unexpected queue instead.
  } else if (auto recv = queues_.take_posted(peer, header.envelope)) {
    deliver(peer, header, *recv, payload);
  } else {
    keep_unexpected(peer, header, payload);
  }
  reposts_.push_back(&inbox);
}

void PipeEngine::keep_unexpected(int peer, const detail::FrameHeader& header, const uint8_t* payload) {
  // An announcement's payload waits at its sender (the library's rendezvous):
  // only its header is held here.
  const bool inline_payload = header.kind == detail::FrameKind::Message;
  const size_t charge = (inline_payload ? header.payload_bytes : 0) + detail::UnexpectedMessage::kOverheadBytes;
  size_t& held = unexpected_bytes_[static_cast<size_t>(peer)];
  if (held + charge > tuning_.unexpected_limit) {
    cut_off_[static_cast<size_t>(peer)] = 1;
    lose_peer(peer, error_at<ConnectionError>(
                        std::string(name_) + " backend", rank(), peer,
                        "rank {} was cut off: it sent {} bytes of messages that no receive has taken, past the limit "
                        "of {} per peer (THD_MAX_UNEXPECTED_BYTES); what it sends from now on is dropped",
                        peer, held + charge, tuning_.unexpected_limit));
    THD_LOG_WARN("{} backend (rank {}): cut off rank {}: {} bytes of its messages wait for receives (limit {})",
                 name_, rank(), peer, held, tuning_.unexpected_limit);
    return;
  }
  held += charge;
  detail::UnexpectedMessage message;
  message.source = peer;
  message.header = header;
  message.charged = charge;
  if (inline_payload && header.payload_bytes > 0) {
    message.payload.reset(new uint8_t[header.payload_bytes]);
    std::memcpy(message.payload.get(), payload, header.payload_bytes);
  }
  message.arrived = inline_payload ? header.payload_bytes : 0;
  queues_.add_unexpected(std::move(message));
}

void PipeEngine::on_send_part(SendPart& part, std::exception_ptr error) {
  part.pending = false;
  --transfers_;
  Outgoing& m = *part.message;
  if (error && !m.error) m.error = error;
  if (m.pending() > 0) return;
  // A send_blocking the pipe finished at once has no request: send_inline takes
  // its outcome from m.error.
  if (m.error) {
    if (m.request) m.request->fail(m.error);
    if (peer_error(m.peer) == nullptr && !closing_) {
      // A send the library failed leaves the peer's message stream unusable.
      lose_peer(m.peer, m.error);
    }
  } else if (m.request) {
    m.request->complete(-1, m.nbytes);
  }
  if (!m.listed) return;  // send_inline's, which recycles it
  auto it = sends_.find(m.request.get());
  if (it != sends_.end() && it->second.get() == &m) {
    retire_send(it);
    return;
  }
  std::erase_if(orphan_sends_, [&](const std::unique_ptr<Outgoing>& o) { return o.get() == &m; });
}

void PipeEngine::on_data(DataRecv& op, std::exception_ptr error, size_t bytes) {
  op.pending = false;
  --transfers_;
  if (op.request) {
    if (error) {
      op.request->fail(error);
    } else if (bytes != op.expected) {
      op.request->fail(error_at<ConnectionError>(op.request->op, rank(), op.peer,
                                                 "rank {} announced {} bytes but sent {}", op.peer, op.expected,
                                                 bytes));
    } else {
      op.request->complete(op.peer, bytes);
    }
  }
  data_recvs_.erase(&op);
}

void PipeEngine::lose_peer(int peer, std::exception_ptr why) {
  if (lost_.any() && peer_error(peer)) return;
  std::string text;
  try {
    std::rethrow_exception(why);
  } catch (const Error& e) {
    text = e.message();
  } catch (const std::exception& e) {
    text = e.what();
  }
  if (!lost_.lose(peer, text, pipe_->peer_departed(peer))) return;
  THD_LOG_DEBUG("{} backend (rank {}): lost rank {}: {}", name_, rank(), peer, text);
  for (auto& recv : queues_.withdraw_if([&](const detail::PostedRecv& r) { return r.source == peer; })) {
    recv.request->fail(lost_error(peer, recv.request->op));
  }
  std::vector<NativeRecv*> withdrawn_native;
  for (auto& r : native_recvs_) {
    if (r->source == peer && (!r->posted || pipe_->cancel(r.get()))) withdrawn_native.push_back(r.get());
  }
  for (NativeRecv* r : withdrawn_native) {
    if (r->request) r->request->fail(lost_error(peer, r->request->op));
    erase_native(*r);
  }
  // Transfers the library may never finish with a peer that is gone. A send whose
  // bytes a tensor keeps alive, or that the control message carries, fails now (the
  // library lets go of it later or never, harmlessly); a payload receive fails now
  // if the library withdraws it. Those left point into the caller's memory: the
  // pipe is told below, and ends them with the peer's loss (a pipe that cannot
  // leaves them to the library's own detection or their deadline).
  for (auto& [req, m] : sends_) {
    if (m->peer != peer || m->request->finished()) continue;
    if (!m->data_part.pending || m->request->keeps_memory() || !m->owned.empty()) {
      m->request->fail(lost_error(peer, m->request->op));
    }
  }
  std::vector<DataRecv*> withdrawn;
  for (auto& [ptr, d] : data_recvs_) {
    if (d->peer == peer && d->pending && pipe_->cancel(d.get())) withdrawn.push_back(ptr);
  }
  for (DataRecv* d : withdrawn) {
    if (d->request) d->request->fail(lost_error(peer, d->request->op));
    --transfers_;
    data_recvs_.erase(d);
  }
  // A loss the library did not report (the process watch, heartbeats, a refused
  // proof) must reach it too: the library would otherwise keep a send to a dead
  // process in flight until its own detection, if ever (UCX's shared-memory
  // keepalive), and with it the caller waiting on that send.
  pipe_->peer_lost(peer, text);
}

void PipeEngine::cancel(const std::shared_ptr<RequestState>& request, std::exception_ptr why, const Drive& drive) {
  for (auto& owned : native_recvs_) {
    NativeRecv& r = *owned;
    if (r.request != request) continue;
    request->fail(why);
    if (!r.posted || pipe_->cancel(&r)) {
      erase_native(r);
      advance_native();
      settle();
      return;
    }
    // The library matched it already: its bytes land in the receive's memory, which
    // must be over before cancel returns. The request is let go of: it may not
    // outlive this call (recv_blocking's lives on its caller's stack).
    r.request.reset();
    const NativeRecv* pending = &r;
    const uint64_t serial = r.serial;
    const int peer = r.source;
    // The node outlives its receive (spare_native_) and may serve a later one.
    auto listed = [&] {
      return std::any_of(native_recvs_.begin(), native_recvs_.end(), [&](const std::unique_ptr<NativeRecv>& n) {
        return n.get() == pending && n->serial == serial;
      });
    };
    if (!drive(net::deadline_after(tuning_.withdraw_wait), [&] { return !listed(); }) && peer >= 0 &&
        peer != rank()) {
      lose_peer(peer, error_at<TimeoutError>(request->op, rank(), peer,
                                             "a withdrawn receive from rank {} did not finish within {} ms", peer,
                                             tuning_.withdraw_wait.count()));
    }
    return;
  }
  if (auto recv = queues_.withdraw(request.get())) {
    request->fail(why);
    return;
  }
  if (auto it = sends_.find(request.get()); it != sends_.end()) {
    Outgoing& m = *it->second;
    request->fail(why);
    // A payload in the caller's own memory (no tensor keeps it) must be out of the
    // library's hands before cancel returns; a tensor's is kept by the request.
    const bool borrowed = m.data_part.pending && !request->keeps_memory();
    if (borrowed && !drive(net::deadline_after(tuning_.withdraw_wait),
                                  [&] { return !m.data_part.pending; })) {
      lose_peer(m.peer, error_at<TimeoutError>(request->op, rank(), m.peer,
                                               "a withdrawn send to rank {} did not leave within {} ms", m.peer,
                                               tuning_.withdraw_wait.count()));
    }
    it = sends_.find(request.get());
    if (it != sends_.end()) {
      orphan_sends_.push_back(std::move(it->second));
      sends_.erase(it);
    }
    return;
  }
  for (auto& [ptr, op] : data_recvs_) {
    if (op->request != request) continue;
    DataRecv* d = ptr;
    request->fail(why);
    if (pipe_->cancel(d)) {
      --transfers_;
      data_recvs_.erase(d);
      return;
    }
    // The library matched it already: its bytes land in the receive's memory, which
    // must be over before cancel returns.
    d->request = nullptr;
    const bool finished =
        drive(net::deadline_after(tuning_.withdraw_wait), [&] { return !data_recvs_.contains(d); });
    if (!finished) {
      lose_peer(d->peer, error_at<TimeoutError>(request->op, rank(), d->peer,
                                                "a withdrawn receive from rank {} did not finish within {} ms",
                                                d->peer, tuning_.withdraw_wait.count()));
    }
    return;
  }
  request->fail(why);  // finished already (then this does nothing) or unknown here
}

std::shared_ptr<const RequestState> PipeEngine::send_control(int peer, std::vector<uint8_t> bytes,
                                                                const std::string& what) {
  auto request = std::make_shared<RequestState>(what + " to rank " + std::to_string(peer), net::Deadline::max(),
                                                nullptr, rank());
  Outgoing& out = add_send(request, peer);
  out.control = std::move(bytes);
  out.control_part.pending = true;
  ++transfers_;
  pipe_->send(peer, kControlTag, out.control, &out.control_part);
  return request;
}

PipeEngine::SendMap::node_type PipeEngine::new_send() {
  // A map node made the only way the standard offers: through a map.
  SendMap scratch;
  scratch.emplace(nullptr, std::make_unique<Outgoing>(this));
  return scratch.extract(scratch.begin());
}

PipeEngine::Outgoing& PipeEngine::add_send(const std::shared_ptr<RequestState>& request, int peer) {
  SendMap::node_type node = spare_send();
  node.key() = request.get();
  Outgoing* m = sends_.insert(std::move(node)).position->second.get();
  m->request = request;
  m->peer = peer;
  m->listed = true;
  return *m;
}

void PipeEngine::recycle_send(SendMap::node_type node) {
  constexpr size_t kSpareSends = 64;
  // Buffers past the inline size were a large control message's; not worth keeping.
  const size_t keep_bytes = tuning_.inline_bytes + kHeaderBytes;
  if (spare_sends_.size() >= kSpareSends) return;
  Outgoing& m = *node.mapped();
  m.listed = false;
  m.request.reset();  // the request's tensors are the caller's again
  m.peer = -1;
  m.payload = {};
  m.nbytes = 0;
  m.error = nullptr;
  // Kept at its size: the next message of the same size (a ping-pong's) resizes
  // it for free.
  if (m.control.capacity() > keep_bytes) std::vector<uint8_t>().swap(m.control);
  std::vector<uint8_t>().swap(m.owned);
  spare_sends_.push_back(std::move(node));
}

// ---- messages the library matches itself ---------------------------------------------

bool PipeEngine::send_native_at_once(std::span<const uint8_t> data, int dst, const Envelope& envelope) {
  if (!native_ || closing_ || data.size() > kAtOnceBytes + kHeaderBytes || dst < 0 || dst >= size_ || dst == rank_ ||
      (lost_.any() && lost_.error(dst))) {
    return false;
  }
  const auto tag = pipe_->native_tag(envelope, rank_);
  return tag && pipe_->send_tagged_at_once(dst, *tag, data);
}

void PipeEngine::send_native(uint64_t tag, std::span<const uint8_t> data, int dst,
                             const std::shared_ptr<RequestState>& request) {
  Outgoing& m = add_send(request, dst);
  m.set_payload(data, heartbeats_ && !request->keeps_memory());
  m.data_part.pending = true;
  ++transfers_;
  pipe_->send_tagged(dst, tag, m.payload, &m.data_part);
  settle();
}

void PipeEngine::post_native_recv(std::span<uint8_t> data, int src, const Envelope& envelope,
                                  const std::shared_ptr<RequestState>& request) {
  if (spare_native_.empty()) {
    native_recvs_.push_back(std::make_unique<NativeRecv>(this));
  } else {
    native_recvs_.splice(native_recvs_.end(), spare_native_, spare_native_.begin());
  }
  NativeRecv& r = *native_recvs_.back();
  r.self = std::prev(native_recvs_.end());
  r.serial = ++native_serial_;
  r.request = request;
  r.data = data;
  r.source = src;
  r.envelope = envelope;
  r.match = pipe_->native_match(envelope, src);
  r.posted = false;
  r.sender_tag = 0;
  ++native_waiting_;
  // A lost peer sends nothing more: a receive from it takes a message that came
  // before it went, or fails now (the library matches by tag, and would let the
  // receive wait for its deadline).
  if (src != kAnySource && src != rank() && lost_.any() && peer_error(src) &&
      !pipe_->probe_tagged(r.match.tag, r.match.mask)) {
    request->fail(lost_error(src, request->op));
    erase_native(r);
    return;
  }
  // Held back behind any receive of any length that could take the same messages:
  // the library would otherwise give this one the message that receive is owed.
  // With none held back, a receive of known length goes to the library at once.
  if (native_waiting_ == 1 && !request->any_length) {
    post_native(r);
    return;
  }
  advance_native();
}

namespace {
// Whether two receives can take the same message.
bool overlap(const Envelope& a, int a_source, const Envelope& b, int b_source) {
  return a.context == b.context && a.tag == b.tag &&
         (a_source == b_source || a_source == kAnySource || b_source == kAnySource);
}
}  // namespace

void PipeEngine::advance_native() {
  if (native_waiting_ == 0) return;
  std::vector<NativeRecv*> lost;
  for (auto it = native_recvs_.begin(); it != native_recvs_.end(); ++it) {
    NativeRecv& r = **it;
    if (r.posted) continue;
    bool blocked = false;
    for (auto e = native_recvs_.begin(); e != it && !blocked; ++e) {
      blocked = !(*e)->posted && overlap((*e)->envelope, (*e)->source, r.envelope, r.source);
    }
    if (blocked) continue;
    if (!r.request->any_length) {
      post_native(r);
      continue;
    }
    const auto probed = pipe_->probe_tagged(r.match.tag, r.match.mask);
    if (!probed) {
      if (r.source != kAnySource && r.source != rank() && peer_error(r.source)) lost.push_back(&r);
      continue;
    }
    // Its length is known now: the receive gets a buffer of that size (or fails,
    // and the message is taken into one to drop), then takes exactly that message.
    const MessagePipe::NativeOrigin origin = pipe_->native_origin(probed->tag);
    detail::PostedRecv posted{r.request, r.data, r.source, r.envelope};
    const Envelope arrived = pipe_->native_envelope(r.envelope, probed->tag, probed->length);
    if (auto error = detail::accept_any_length(rank(), origin.sender, posted, arrived, probed->length, nullptr)) {
      r.request->fail(error);
      r.discarding = true;
      r.discard.resize(probed->length);
      r.data = r.discard;
    } else {
      r.data = posted.data;
    }
    r.match = {probed->tag, ~uint64_t{0}};
    r.source = origin.sender;
    post_native(r);
  }
  for (NativeRecv* r : lost) {
    r->request->fail(lost_error(r->source, r->request->op));
    erase_native(*r);
  }
}

void PipeEngine::post_native(NativeRecv& r) {
  r.posted = true;
  --native_waiting_;
  pipe_->recv_tagged(r.source == kAnySource ? -1 : r.source, r.match.tag, r.match.mask, r.data, &r.sender_tag, &r);
}

void PipeEngine::on_native(NativeRecv& r, std::exception_ptr error, size_t bytes) {
  const std::shared_ptr<RequestState> request = r.request;
  if (request && !r.discarding) {
    const MessagePipe::NativeOrigin origin = pipe_->native_origin(r.sender_tag);
    if (error) {
      // A message longer than the receive (the pipe gives its length): named as
      // any mismatch is, with both kinds and lengths.
      if (bytes > 0 && !request->any_length) {
        error = detail::message_mismatch(rank(), origin.sender, r.envelope, r.data.size(),
                                         pipe_->native_envelope(r.envelope, r.sender_tag, bytes), bytes);
      }
      request->fail(error);
    } else if (request->any_length) {
      request->complete(origin.sender, bytes);
    } else if (auto mismatch = detail::check_match(rank(), origin.sender, r.envelope, r.data.size(),
                                                   pipe_->native_envelope(r.envelope, r.sender_tag, bytes), bytes)) {
      request->fail(mismatch);
    } else {
      request->complete(origin.sender, bytes);
    }
  }
  erase_native(r);
  advance_native();
}

void PipeEngine::erase_native(NativeRecv& r) {
  if (!r.posted) --native_waiting_;
  r.request.reset();
  r.data = {};
  if (r.discarding) {
    std::vector<uint8_t>().swap(r.discard);
    r.discarding = false;
  }
  spare_native_.splice(spare_native_.begin(), native_recvs_, r.self);
}

}  // namespace thd::detail::pipe
