#include "datachannel/pipe/pipe_transport.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

#include <fmt/ranges.h>

#include "datachannel/check.h"
#include "datachannel/net/auth.h"
#include "datachannel/net/thread_name.h"
#include "datachannel/pipe/small_message_header.h"
#include "datachannel/spin_policy.h"
#include "datachannel/wire.h"
#include "datachannel/transport_options.h"
#include "tensor/log.h"

namespace thd::detail::pipe {

namespace {

constexpr size_t kHeaderBytes = detail::kFrameHeaderBytes;
// The largest payload send_at_once offers MessagePipe::send_at_once, from a frame on
// its stack. Libraries' short paths take about 100 bytes (UCX's shared memory).
constexpr size_t kAtOnceBytes = 256 - kHeaderBytes;
// How long the progress thread keeps out of the way after a waiter last drove.
constexpr std::chrono::microseconds kStandDown{1000};
// How often the progress thread looks again while it stands down. Not every
// kStandDown: each look takes a core from the spinning waiters, and looking every
// millisecond cost a small message's round trip some 20 ns on two cores. So it
// resumes between kStandDownLook and twice that after the last drive (a blocked
// waiter calls it back at once).
constexpr std::chrono::milliseconds kStandDownLook{4};
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

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(net::Clock::now().time_since_epoch()).count();
}

template <typename E, typename... Args>
std::exception_ptr make_error(const std::string& op, int rank, int peer, fmt::format_string<Args...> f,
                              Args&&... args) {
  return std::make_exception_ptr(
      E(fmt::format(f, std::forward<Args>(args)...), context_at(op, rank, peer, __FILE__, __LINE__)));
}

}  // namespace

namespace {

// The variable `name` as a whole number in [min, max] of `unit`, nullopt when it is
// unset or empty; ValueError naming it otherwise.
std::optional<long long> env_number(const net::EnvLookup& env, const char* name, long long min, long long max,
                                    const char* unit) {
  const auto v = env(name);
  if (!v || v->empty()) return std::nullopt;
  char* end = nullptr;
  const long long n = std::strtoll(v->c_str(), &end, 10);
  THD_CHECK(end && *end == '\0' && n >= min && n <= max, ValueError, "DataChannel::create",
            "{} must be a number of {} in [{}, {}], got '{}'", name, unit, min, max, *v);
  return n;
}

}  // namespace

PipeTuning pipe_tuning_from_env(const net::EnvLookup& env) {
  PipeTuning t;
  t.unexpected_limit = max_unexpected_bytes("DataChannel::create", t.unexpected_limit, env);
  if (auto us = env_number(env, "THD_PIPE_SPIN_US", 0, 1000000, "microseconds")) {
    t.spin_budget = std::chrono::microseconds(*us);
  }
  if (auto ms = env_number(env, "THD_PIPE_HEARTBEAT_TIMEOUT_MS", 100, 3600000, "milliseconds")) {
    t.heartbeat_timeout = std::chrono::milliseconds(*ms);
    t.heartbeat_interval = std::min(t.heartbeat_interval, t.heartbeat_timeout / 4);
  }
  if (auto ns = env_number(env, "THD_PIPE_YIELD_SWITCH_NS", 1, 1000000, "nanoseconds")) {
    t.yield_switch = std::chrono::nanoseconds(*ns);
  }
  return t;
}

namespace {

// Ranks of this job on this host: the launcher's count (thdrun, Open MPI, MPICH),
// else the whole world when it listens on loopback (one host), else unknown (1).
int local_ranks(const DataChannelOptions& options) {
  for (const char* name : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    if (auto v = net::process_env(name); v && !v->empty()) {
      const int n = std::atoi(v->c_str());
      if (n > 0) return n;
    }
  }
  const std::string& host = options.bind_host;
  const bool loopback = host.starts_with("127.") || host == "localhost" || host == "::1" || host == "[::1]";
  return loopback ? options.world_size : 1;
}

}  // namespace

PipeTuning pipe_tuning_for(const DataChannelOptions& options) {
  PipeTuning tuning = pipe_tuning_from_env();
  // More ranks on this host than cores: a waiter that spins hard takes the core the
  // rank it waits for needs (4 ranks on 2 cores: all_reduce 3x slower), and one that
  // blocks at once pays two thread wake-ups a message. It spins as long, but yields
  // the core every round, as Open MPI does when oversubscribed.
  if (local_ranks(options) > detail::usable_cpus()) {
    tuning.yield_while_spinning = true;
    const auto given = net::process_env("THD_PIPE_YIELD_SWITCH_NS");
    if (!given || given->empty()) tuning.yield_switch = measure_yield_switch();
  }
  return tuning;
}

std::shared_ptr<Transport> make_pipe_transport(std::unique_ptr<MessagePipe> pipe, const DataChannelOptions& options) {
  const std::string op = std::string(pipe->name()) + " backend";
  PipeAuth auth{net::resolve_auth_token(options.token, op), options.store, options.timeout};
  return std::make_shared<PipeTransport>(std::move(pipe), std::move(auth), pipe_tuning_for(options));
}

void PipeTransport::EngineOp::done(std::exception_ptr error, size_t bytes) noexcept {
  // The pipe calls this with the engine lock held (every pipe call is made under it).
  if (kind == Kind::Control && !error && transport->take_inline_message(static_cast<ControlInbox&>(*this), bytes)) {
    return;
  }
  transport->completions_.push_back({this, std::move(error), bytes});
}

bool PipeTransport::parse_control(const ControlInbox& inbox, size_t bytes, detail::FrameHeader* header,
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

bool PipeTransport::take_inline_message(ControlInbox& inbox, size_t bytes) noexcept {
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

PipeTransport::PipeTransport(std::unique_ptr<MessagePipe> pipe, PipeAuth auth, const PipeTuning& tuning)
    : Transport(pipe->rank(), pipe->size()),
      name_(pipe->name()),
      tuning_(tuning),
      pipe_(std::move(pipe)),
      max_data_tag_(pipe_->max_tag()),
      host_collectives_(pipe_->host_collectives()),
      inboxes_(static_cast<size_t>(size())),
      next_data_tag_(static_cast<size_t>(size()), 1),
      unexpected_bytes_(static_cast<size_t>(size()), 0),
      cut_off_(static_cast<size_t>(size()), 0),
      proof_(rank(), size(), std::move(auth.token)),
      liveness_(rank(), size(),
                LivenessTuning{.heartbeats = !pipe_->detects_silent_peer_loss(),
                               .heartbeat_interval = tuning.heartbeat_interval,
                               .heartbeat_timeout = tuning.heartbeat_timeout},
                net::Clock::now()),
      heartbeats_(liveness_.heartbeats()),
      heartbeat_out_(static_cast<size_t>(size()), nullptr),
      lost_peers_(rank(), size(), name_ + " backend") {
  THD_CHECK(max_data_tag_ >= 2, ValueError, "DataChannel::create", "the {} pipe offers no data tags", name_);
  THD_CHECK(auth.store != nullptr, ValueError, "DataChannel::create", "the {} backend needs the channel's store",
            name_);
  try {
    prove_token(auth);
  } catch (...) {
    // Nothing may complete into this half-made transport: the pipe goes first.
    std::lock_guard lock(mu_);
    pipe_.reset();
    completions_.clear();
    throw;
  }
  progress_ = std::thread([this] { progress_loop(); });
}

// The handshake (token_proof.h): nonces through the store, then a hello to every
// peer as its first control message; returns once every peer proved the token.
void PipeTransport::prove_token(const PipeAuth& auth) {
  const std::string op = name_ + " backend";
  const std::vector<std::string> identities =
      proof_.exchange(*auth.store, auth.timeout, auth.identity.value_or(this_process()).encode(), op);
  for (int p = 0; p < size(); ++p) {
    if (p != rank()) liveness_.watch(p, identities[static_cast<size_t>(p)]);
  }
  std::unique_lock lock(mu_);
  // An inbox is listed at most once in either: take_inline_message, which runs
  // where the pipe reports a message, must not allocate.
  reposts_.reserve(static_cast<size_t>(size()));
  flushing_.reserve(static_cast<size_t>(size()));
  for (int p = 0; p < size(); ++p) {
    if (p == rank()) continue;
    inboxes_[static_cast<size_t>(p)] =
        std::make_unique<ControlInbox>(this, p, kHeaderBytes + tuning_.inline_bytes);
    post_control_recv(*inboxes_[static_cast<size_t>(p)]);
  }
  for (int p = 0; p < size(); ++p) {
    if (p != rank()) send_control(p, proof_.hello_for(p), "token proof");
  }
  settle();
  const net::Deadline until = net::deadline_after(auth.timeout);
  const bool done = drive_locked(lock, until, [&] {
    for (int p = 0; p < size(); ++p) {
      if (p != rank() && !proof_.proved(p) && !proof_.refused(p) && !peer_error(p)) {
        return false;
      }
    }
    return true;
  });
  for (int p = 0; p < size(); ++p) {
    if (proof_.refused(p)) {
      THD_THROW_AT(AuthError, op, rank(), p, "{} (the ranks of one channel must hold the same token; this rank's "
                   "came from {})", proof_.refusal(p), proof_.token_source());
    }
  }
  for (int p = 0; p < size(); ++p) {
    if (p != rank() && !proof_.proved(p)) {
      if (auto lost = peer_error(p)) std::rethrow_exception(lost);
    }
  }
  if (!done) {
    std::vector<int> silent;
    for (int p = 0; p < size(); ++p) {
      if (p != rank() && !proof_.proved(p)) silent.push_back(p);
    }
    THD_THROW_AT(TimeoutError, op, rank(), silent.size() == 1 ? silent[0] : -1,
                 "no token proof from rank{} {} within {} ms", silent.size() == 1 ? "" : "s", fmt::join(silent, ", "),
                 auth.timeout.count());
  }
}

// The first control message of every peer: its proof. Anything else, or a proof
// that does not verify, and the peer is refused.
bool PipeTransport::on_hello(ControlInbox& inbox, size_t bytes) {
  if (proof_.check_hello(inbox.peer, {inbox.buffer.get(), bytes})) return true;
  lose_peer(inbox.peer, make_error<AuthError>(name_ + " backend", rank(), inbox.peer, "{}", proof_.refusal(inbox.peer)));
  return false;
}

PipeTransport::~PipeTransport() {
  std::unique_lock lock(mu_);
  closing_ = true;
  // Replies a worker sent last (a session's goodbye) must leave before the pipe goes.
  drive_locked(lock, net::deadline_after(tuning_.close_linger), [&] {
    for (const auto& [req, m] : sends_) {
      if (m->pending() > 0 && !peer_error(m->peer)) return false;
    }
    return true;
  });
  stop_.store(true);
  pipe_->interrupt();
  lock.unlock();
  if (progress_.joinable()) progress_.join();
  lock.lock();
  for (auto& recv : queues_.withdraw_if([](const detail::PostedRecv&) { return true; })) {
    recv.request->fail(closed_error(recv.request->op));
  }
  for (auto& [req, m] : sends_) m->request->fail(closed_error(m->request->op));
  for (auto& [op, d] : data_recvs_) {
    if (d->request) d->request->fail(closed_error(d->request->op));
  }
  // The pipe withdraws what is still posted; completions it reports now are dropped.
  pipe_.reset();
  completions_.clear();
}

std::exception_ptr PipeTransport::closed_error(const std::string& op) const {
  return make_error<ConnectionError>(op, rank(), -1, "channel closed (the {} transport was destroyed)", name_);
}

std::exception_ptr PipeTransport::lost_error(int peer, const std::string& op) const {
  return lost_peers_.error_for(peer, op);
}

std::exception_ptr PipeTransport::peer_error(int world_rank) const { return lost_peers_.error(world_rank); }

bool PipeTransport::peer_departed(int world_rank) const { return lost_peers_.departed(world_rank); }

// ---- posting ------------------------------------------------------------------------

void PipeTransport::post_send(std::span<const uint8_t> data, int dst, const Envelope& envelope,
                              const std::shared_ptr<RequestState>& request) {
  std::unique_lock lock(mu_);
  if (closing_) {
    request->fail(closed_error(request->op));
    return;
  }
  if (dst < 0 || dst >= size() || data.size() > detail::kMaxPayloadBytes) {
    request->fail(make_error<ValueError>(request->op, rank(), dst, "cannot send {} bytes to rank {} of a world of {}",
                                         data.size(), dst, size()));
    return;
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
    lock.unlock();
    wake_sleeper();
    return;
  }
  // An announced message: its header now, its payload on a data tag of its own.
  Outgoing& m = add_send(request, dst);
  m.nbytes = data.size();
  uint32_t& next = next_data_tag_[static_cast<size_t>(dst)];
  const uint32_t data_tag = next;
  next = next >= max_data_tag_ ? 1 : next + 1;
  const detail::FrameHeaderBytes header =
      detail::encode_frame_header(envelope, data.size(), detail::FrameKind::ReadyToSend, data_tag);
  m.control.assign(header.begin(), header.end());
  m.payload = data;
  // A pipe that cannot tell a dead peer may keep a send to it forever, while the
  // request must be failed when the peer is found lost: bytes no tensor keeps
  // alive travel from a copy, so failing the request frees nothing in use.
  if (heartbeats_ && !request->keeps_memory()) {
    m.owned.assign(data.begin(), data.end());
    m.payload = m.owned;
  }
  m.control_part.pending = true;
  ++transfers_;
  pipe_->send(dst, kControlTag, m.control, &m.control_part);
  m.data_part.pending = true;
  ++transfers_;
  pipe_->send(dst, data_tag, m.payload, &m.data_part);
  flush_reposts();
  settle();
  lock.unlock();
  wake_sleeper();
}

bool PipeTransport::send_at_once(std::span<const uint8_t> data, int dst, const Envelope& envelope) {
  if (data.size() > kAtOnceBytes) return false;
  std::array<uint8_t, kHeaderBytes + kAtOnceBytes> frame;  // NOLINT: written before it is read
  const size_t header_bytes = write_message_header(frame.data(), envelope, data.size());
  copy_bytes(frame.data() + header_bytes, data.data(), data.size());
  if (!pipe_->send_at_once(dst, kControlTag, {frame.data(), header_bytes + data.size()})) return false;
  flush_reposts();
  settle();
  return true;
}

std::shared_ptr<RequestState> PipeTransport::send_blocking(std::span<const uint8_t> data, int dst,
                                                           const Envelope& envelope, const RequestMaker& make_request) {
  std::unique_lock lock(mu_);
  // Anything but a small message to a healthy peer takes the general path, which
  // also reports what is wrong.
  if (closing_ || dst < 0 || dst >= size() || dst == rank() || data.size() > tuning_.inline_bytes ||
      (lost_peers_.any() && peer_error(dst))) {
    lock.unlock();
    return Transport::send_blocking(data, dst, envelope, make_request);
  }
  // The common case first, in this frame: on a round trip's latency path, the
  // calls and arguments between here and the library's send showed.
  if (send_at_once(data, dst, envelope)) {
    lock.unlock();
    wake_sleeper();
    return nullptr;
  }
  std::shared_ptr<RequestState> request;
  std::exception_ptr error;
  const bool left = send_inline(data, dst, envelope, request, &make_request, &error);
  lock.unlock();
  wake_sleeper();
  if (left && error) {
    request = make_request();
    request->fail(std::move(error));
  }
  return request;
}

bool PipeTransport::send_inline(std::span<const uint8_t> data, int dst, const Envelope& envelope,
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

void PipeTransport::post_recv(std::span<uint8_t> data, int src, const Envelope& envelope,
                              const std::shared_ptr<RequestState>& request) {
  std::unique_lock lock(mu_);
  post_recv_locked(data, src, envelope, request);
  lock.unlock();
  wake_sleeper();
}

void PipeTransport::post_recv_locked(std::span<uint8_t> data, int src, const Envelope& envelope,
                                     const std::shared_ptr<RequestState>& request) {
  if (closing_) {
    request->fail(closed_error(request->op));
    return;
  }
  if (src != kAnySource && (src < 0 || src >= size())) {
    request->fail(make_error<ValueError>(request->op, rank(), src, "cannot receive from rank {} of a world of {}", src,
                                         size()));
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

int PipeTransport::recv_blocking(std::span<uint8_t> data, int src, const Envelope& envelope,
                                 const RequestSpec& spec) {
  // The request lives on this stack, behind a pointer that owns nothing: the
  // queues' copies of it cost no atomic count, and none outlives this call (the
  // receive is matched or withdrawn before it returns; Transport's contract).
  // RequestState::complete publishes the status last, so a finisher on another
  // thread is done with the request once this thread sees it finished.
  RequestState state(spec, this);
  const std::shared_ptr<RequestState> request(std::shared_ptr<RequestState>(), &state);
  {
    std::lock_guard lock(mu_);
    post_recv_locked(data, src, envelope, request);
    // One round while the lock is held anyway: a message already at the library
    // is taken without the waiter's first round locking again.
    if (!state.finished() && !state.passive_wait && !closing_) {
      if (pipe_->progress() > 0 && !completions_.empty()) settle();
    }
  }
  wake_sleeper();
  Request(request).wait();
  return state.source;
}

void PipeTransport::send_to_self(std::span<const uint8_t> data, const Envelope& envelope,
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

void PipeTransport::deliver(int source, const detail::FrameHeader& header, detail::PostedRecv& recv,
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

void PipeTransport::deliver_other(int source, const detail::FrameHeader& header, detail::PostedRecv& recv,
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

void PipeTransport::receive_payload(int peer, uint32_t data_tag, uint64_t bytes,
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
        lose_peer(peer, make_error<ConnectionError>(
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

void PipeTransport::post_control_recv(ControlInbox& inbox) {
  if (closing_ && stop_.load()) return;
  inbox.posted = true;
  pipe_->recv(inbox.peer, kControlTag, {inbox.buffer.get(), inbox.capacity}, &inbox);
}

void PipeTransport::flush_reposts() {
  if (reposts_.empty()) return;
  // A receive the pipe finishes at once may be handled at once
  // (take_inline_message), and add its inbox to reposts_ for the next flush.
  std::swap(reposts_, flushing_);
  for (ControlInbox* inbox : flushing_) {
    if (!stop_.load() && !inbox->posted) post_control_recv(*inbox);
  }
  flushing_.clear();
}

// ---- completions --------------------------------------------------------------------

void PipeTransport::settle() {
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
    }
  }
  settling_ = false;
}

void PipeTransport::on_control(ControlInbox& inbox, std::exception_ptr error, size_t bytes) {
  inbox.posted = false;
  const int peer = inbox.peer;
  if (error) {
    if (!closing_) lose_peer(peer, error);
    return;
  }
  // Only heartbeats read it; a clock read is a measurable part of a small message.
  if (heartbeats_) liveness_.heard(peer, net::Clock::now());
  if (!proof_.proved(peer)) {
    if (on_hello(inbox, bytes) && !stop_.load()) post_control_recv(inbox);
    return;
  }
  if (Liveness::is_heartbeat({inbox.buffer.get(), bytes})) {
    if (!stop_.load()) post_control_recv(inbox);
    return;
  }
  std::string why;
  detail::FrameHeader header;
  size_t header_bytes = 0;
  if (!parse_control(inbox, bytes, &header, &header_bytes, &why)) {
    lose_peer(peer, make_error<ConnectionError>(std::string(name_) + " backend", rank(), peer,
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

void PipeTransport::keep_unexpected(int peer, const detail::FrameHeader& header, const uint8_t* payload) {
  // An announcement's payload waits at its sender (the library's rendezvous):
  // only its header is held here.
  const bool inline_payload = header.kind == detail::FrameKind::Message;
  const size_t charge = (inline_payload ? header.payload_bytes : 0) + detail::UnexpectedMessage::kOverheadBytes;
  size_t& held = unexpected_bytes_[static_cast<size_t>(peer)];
  if (held + charge > tuning_.unexpected_limit) {
    cut_off_[static_cast<size_t>(peer)] = 1;
    lose_peer(peer, make_error<ConnectionError>(
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

void PipeTransport::on_send_part(SendPart& part, std::exception_ptr error) {
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

void PipeTransport::on_data(DataRecv& op, std::exception_ptr error, size_t bytes) {
  op.pending = false;
  --transfers_;
  if (op.request) {
    if (error) {
      op.request->fail(error);
    } else if (bytes != op.expected) {
      op.request->fail(make_error<ConnectionError>(op.request->op, rank(), op.peer,
                                                   "rank {} announced {} bytes but sent {}", op.peer, op.expected,
                                                   bytes));
    } else {
      op.request->complete(op.peer, bytes);
    }
  }
  data_recvs_.erase(&op);
}

void PipeTransport::lose_peer(int peer, std::exception_ptr why) {
  if (lost_peers_.any() && peer_error(peer)) return;
  std::string text;
  try {
    std::rethrow_exception(why);
  } catch (const Error& e) {
    text = e.message();
  } catch (const std::exception& e) {
    text = e.what();
  }
  if (!lost_peers_.lose(peer, text, pipe_->peer_departed(peer))) return;
  THD_LOG_DEBUG("{} backend (rank {}): lost rank {}: {}", name_, rank(), peer, text);
  for (auto& recv : queues_.withdraw_if([&](const detail::PostedRecv& r) { return r.source == peer; })) {
    recv.request->fail(lost_error(peer, recv.request->op));
  }
  // Transfers the library may never finish with a peer that is gone. A send whose
  // bytes a tensor keeps alive, or that the control message carries, fails now (the
  // library lets go of it later or never, harmlessly); a payload receive fails now
  // if the library withdraws it. Those left point into the caller's memory, and
  // wait for the library or their deadline.
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
}

// ---- cancel and waiting -------------------------------------------------------------

void PipeTransport::cancel(const std::shared_ptr<RequestState>& request, std::exception_ptr why) {
  std::unique_lock lock(mu_);
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
    if (borrowed && !drive_locked(lock, net::deadline_after(tuning_.withdraw_wait),
                                  [&] { return !m.data_part.pending; })) {
      lose_peer(m.peer, make_error<TimeoutError>(request->op, rank(), m.peer,
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
        drive_locked(lock, net::deadline_after(tuning_.withdraw_wait), [&] { return !data_recvs_.contains(d); });
    if (!finished) {
      lose_peer(d->peer, make_error<TimeoutError>(request->op, rank(), d->peer,
                                                  "a withdrawn receive from rank {} did not finish within {} ms",
                                                  d->peer, tuning_.withdraw_wait.count()));
    }
    return;
  }
  request->fail(why);  // finished already (then this does nothing) or unknown here
}

bool PipeTransport::drive_locked(std::unique_lock<std::mutex>& lock, net::Deadline until,
                                 const std::function<bool()>& finished) {
  while (!finished()) {
    if (net::Clock::now() >= until) return false;
    flush_reposts();
    if (pipe_->progress() > 0) {
      settle();
      continue;
    }
    settle();
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
  return true;
}

bool PipeTransport::wait(RequestState& request, net::Deadline until) {
  // A caller's yield_spin (P2POptions) lengthens the spin and makes it yield.
  const auto spin_budget = std::max<std::chrono::microseconds>(tuning_.spin_budget, request.yield_spin);
  const bool yield_while_spinning = tuning_.yield_while_spinning || request.yield_spin.count() > 0;
  // The host's yield backs off while yielding gives nothing away; a caller's
  // yield_spin yields every round, as asked.
  const bool adaptive_yield = request.yield_spin.count() == 0;
  if (!request.passive_wait && spin_budget.count() > 0) {
    // Set at the first look at the clock, a few rounds in: most waits of a
    // ping-pong end before it, and a clock read here costs as much as two rounds.
    std::optional<net::Deadline> spin_end;
    bool drove = false;
    // While a waiter drives the pipe the progress thread stands down: two threads
    // taking turns on one library cost each other the lock and the cores. The
    // waiter says it drives by moving drive_marks_, often, with plain stores: a
    // count of drivers cost two atomic read-modify-writes a wait, one of them
    // between a message's arrival and its answer.
    mark_drive();
    // The clock is read every few rounds: a round of an idle library costs less
    // than reading it.
    unsigned idle_rounds = 0;
    for (unsigned round = 0; !request.finished(); ++round) {
      if ((round & 15U) == 15U) {
        const net::Deadline now = net::Clock::now();
        if (!spin_end) spin_end = std::min(until, now + spin_budget);
        if (now >= *spin_end) break;
        mark_drive();
      }
      std::unique_lock lock(mu_, std::try_to_lock);
      if (!lock.owns_lock() || closing_) continue;
      drove = true;
      if (!reposts_.empty()) flush_reposts();
      const int n = pipe_->progress();
      // A message take_inline_message handled leaves nothing to settle.
      if (n > 0 && !completions_.empty()) settle();
      lock.unlock();
      if (n == 0 && yield_while_spinning && ++idle_rounds >= (adaptive_yield ? yield_backoff_.every() : 1U)) {
        idle_rounds = 0;
        yield_core(adaptive_yield);
      }
    }
    // A mark, not a time: a clock read here sat on every round trip's latency path.
    mark_drive();
    if (request.finished()) return true;
    // The progress thread may have armed before this thread consumed the library's
    // events: let it look again before this thread sleeps.
    if (drove) wake_sleeper();
  }
  // A blocked waiter needs the progress thread now.
  blockers_.fetch_add(1, std::memory_order_acq_rel);
  {
    std::lock_guard park(park_mu_);
  }
  park_cv_.notify_one();
  const bool finished = request.block_until(until);
  blockers_.fetch_sub(1, std::memory_order_acq_rel);
  return finished;
}

void PipeTransport::yield_core(bool adaptive) noexcept {
  if (!adaptive) {
    std::this_thread::yield();
    return;
  }
  const auto before = net::Clock::now();
  std::this_thread::yield();
  yield_backoff_.record(net::Clock::now() - before);
}

void PipeTransport::wake_sleeper() noexcept {
  // One interrupt wakes the sleeper for everything posted since: the posts that
  // follow before it runs (on a busy host, many) need not each make a syscall.
  if (sleeping_.load(std::memory_order_acquire) && sleeping_.exchange(false, std::memory_order_acq_rel)) {
    pipe_->interrupt();
  }
}

void PipeTransport::tend_peers(net::Clock::time_point now, bool look_at_processes) {
  if (closing_) return;
  const std::string op = name_ + " backend";
  if (heartbeats_) {
    auto round = liveness_.heartbeat_round(now, [&](int p) { return proof_.proved(p) && !peer_error(p); });
    if (round) {
      for (auto& lost : round->lost) lose_peer(lost.peer, make_error<PeerLost>(op, rank(), lost.peer, "{}", lost.why));
      for (int p : round->send_to) {
        // One heartbeat in flight per peer: a send the library cannot finish (a dead
        // peer) is not piled on. The request is held, not only its address: a
        // finished heartbeat's address comes back for the next one to another peer,
        // which would then look like this peer's heartbeat still in flight.
        auto& out = heartbeat_out_[static_cast<size_t>(p)];
        if (out != nullptr && sends_.contains(out.get())) continue;
        const auto beat = Liveness::heartbeat();
        out = send_control(p, std::vector<uint8_t>(beat.begin(), beat.end()), "heartbeat");
      }
      settle();
    }
  }
  if (look_at_processes) {
    for (auto& lost : liveness_.exits(now, /*look=*/true, [&](int p) { return peer_error(p) != nullptr; })) {
      lose_peer(lost.peer, make_error<PeerLost>(op, rank(), lost.peer, "{}", lost.why));
    }
    settle();
  }
}

std::shared_ptr<const RequestState> PipeTransport::send_control(int peer, std::vector<uint8_t> bytes,
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

PipeTransport::SendMap::node_type PipeTransport::new_send() {
  // A map node made the only way the standard offers: through a map.
  SendMap scratch;
  scratch.emplace(nullptr, std::make_unique<Outgoing>(this));
  return scratch.extract(scratch.begin());
}

PipeTransport::Outgoing& PipeTransport::add_send(const std::shared_ptr<RequestState>& request, int peer) {
  SendMap::node_type node = spare_send();
  node.key() = request.get();
  Outgoing* m = sends_.insert(std::move(node)).position->second.get();
  m->request = request;
  m->peer = peer;
  m->listed = true;
  return *m;
}

void PipeTransport::retire_send(SendMap::iterator it) { recycle_send(sends_.extract(it)); }

void PipeTransport::recycle_send(SendMap::node_type node) {
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

void PipeTransport::mark_drive() noexcept {
  // Not an atomic increment: waiters racing here may lose a step, and any change
  // is all the progress thread looks for.
  drive_marks_.store(drive_marks_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

bool PipeTransport::stand_down() noexcept {
  // A blocked waiter needs this thread whoever else drives.
  if (blockers_.load(std::memory_order_acquire) > 0) return false;
  // A mark since the last look restarts the stand-down: it lasts at least
  // kStandDown after a waiter last drove, and until the next look.
  const int64_t now = now_ns();
  const uint64_t marks = drive_marks_.load(std::memory_order_acquire);
  if (marks != marks_seen_) {
    marks_seen_ = marks;
    stand_down_since_ns_ = now;
  }
  return now - stand_down_since_ns_ < kStandDown.count() * 1000;
}

void PipeTransport::progress_loop() noexcept {
  net::name_this_thread(name_ + "-progress");
  const bool watching = liveness_.watching();
  auto due = [&](net::Clock::time_point now) { return liveness_.look_due(now); };
  while (!stop_.load()) {
    bool armed = false;
    bool busy = false;
    if (stand_down()) {
      // A waiter drives, or did a moment ago and will again soon (a ping-pong):
      // stay out of its way, and leave the library unarmed so that its peers need
      // not signal this process on every message. Bounded, for heartbeats: waiters
      // that keep the pipe busy for longer than the heartbeat timeout (a rank
      // ping-ponging with one peer) must still be heard by the others, and this
      // rank must still notice the others going silent. keep_alive returns at once
      // when nothing is due.
      if (heartbeats_ || watching) {
        const auto now = net::Clock::now();
        if (const bool look = due(now); heartbeats_ || look) {
          std::lock_guard lock(mu_);
          tend_peers(now, look);
        }
      }
      std::unique_lock park(park_mu_);
      park_cv_.wait_for(park, kStandDownLook, [&] { return !stand_down() || stop_.load(); });
      continue;
    }
    {
      std::lock_guard lock(mu_);
      flush_reposts();
      const int n = pipe_->progress();
      settle();
      if (heartbeats_ || watching) {
        const auto now = net::Clock::now();
        tend_peers(now, due(now));
      }
      if (n > 0) continue;
      // Never asleep with a control receive left unposted: some libraries (a
      // libfabric completion queue) wake a sleeper only for posted receives.
      if (!reposts_.empty()) continue;
      busy = transfers_ > 0;
      armed = pipe_->arm();
      if (armed) sleeping_.store(true, std::memory_order_release);
    }
    if (!armed) continue;
    const auto nap = liveness_.nap(std::chrono::milliseconds(100));
    if (!stop_.load()) pipe_->sleep(net::Clock::now() + nap, busy);
    sleeping_.store(false, std::memory_order_release);
  }
}

}  // namespace thd::detail::pipe
