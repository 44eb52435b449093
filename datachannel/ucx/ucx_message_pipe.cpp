#include "datachannel/ucx/ucx_message_pipe.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <new>
#include <system_error>
#include <utility>

#include "datachannel/check.h"
#include "datachannel/pipe/direct_recv.h"
#include "tensor/log.h"

namespace thd::detail::ucx {

namespace {

constexpr const char* kOp = "ucx pipe";

// The destructor's poll slices while it waits for goodbyes and closes.
constexpr std::chrono::milliseconds kCloseSlice{5};

RequestSlot& slot_of(void* request) { return *static_cast<RequestSlot*>(request); }

std::string errno_text(int err) { return std::system_category().message(err); }

// Statuses a send ends with when its endpoint failed or was closed under it.
bool is_endpoint_failure(ucs_status_t status) {
  switch (status) {
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_CANCELED:
    case UCS_ERR_REJECTED:
      return true;
    default:
      return false;
  }
}

ucp_request_param_t request_param(void* self, ucs_memory_type_t memory) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  param.user_data = self;
  param.memory_type = memory;
  return param;
}

// The Hello payload: who the sender is, so a rank of another world (a stale
// address in a reused store) is told apart.
struct Greeting {
  int32_t rank = -1;
  int32_t world_size = -1;
};

class GreetingOp final : public pipe::PipeOp {
 public:
  void done(std::exception_ptr error, size_t) noexcept override {
    finished = true;
    this->error = std::move(error);
  }
  bool finished = false;
  std::exception_ptr error;
};

}  // namespace

UcxMessagePipe::UcxMessagePipe(int rank, int size, UniqueContext context, UniqueWorker worker,
                               const PipeSettings& settings)
    : MessagePipe(rank, size),
      settings_(settings),
      collective_(pipe::CollectiveTagLayout::make(64, size)),
      context_(std::move(context)),
      worker_(std::move(worker)),
      peers_(static_cast<size_t>(size)) {
  ucs_status_t status = ucp_worker_get_efd(worker_.get(), &worker_fd_);
  if (status != UCS_OK) {
    THD_THROW_AT(ConnectionError, kOp, rank, -1,
                 "ucp_worker_get_efd failed: {}. The transports UCX picked (UCX_TLS={}) cannot wake a sleeping "
                 "thread; set UCX_TLS=tcp,self or UCX_TLS=sm,self",
                 ucs_status_string(status), effective_setting(settings_, "TLS", "all"));
  }
  interrupt_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  THD_CHECK(interrupt_fd_.valid(), ConnectionError, kOp, "eventfd failed: {}", errno_text(errno));
  for (int r = 0; r < size; ++r) {
    peers_[static_cast<size_t>(r)].pipe = this;
    peers_[static_cast<size_t>(r)].rank = r;
  }
  pending_.prev = pending_.next = &pending_;
  host_send_param_ = request_param(this, UCS_MEMORY_TYPE_HOST);
  host_send_param_.cb.send = &UcxMessagePipe::on_send_done;
  direct_recv_param_ = request_param(this, UCS_MEMORY_TYPE_HOST);
  direct_recv_param_.cb.recv = &UcxMessagePipe::on_direct_recv_done;
  direct_recv_param_.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  at_once_param_.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
  at_once_param_.memory_type = UCS_MEMORY_TYPE_HOST;
  // Before any endpoint exists, so no goodbye can come in unlooked-for (one that
  // did would wait in UCX's unexpected queue for this receive anyway).
  goodbye_requests_.assign(peers_.size(), nullptr);
  spent_.reserve(kSpentRequests);  // complete() must not allocate
  for (int r = 0; r < size; ++r) {
    if (r != rank) post_goodbye_recv(r);
  }
}

void UcxMessagePipe::connect(const std::vector<std::vector<uint8_t>>& addresses) {
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) continue;
    Peer& peer = peers_[static_cast<size_t>(r)];
    ucp_ep_params_t params{};
    params.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(addresses[static_cast<size_t>(r)].data());
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &UcxMessagePipe::on_peer_error;
    params.err_handler.arg = &peer;
    ucs_status_t status = ucp_ep_create(worker_.get(), &params, &peer.ep);
    if (status != UCS_OK) {
      peer.ep = nullptr;
      THD_THROW_AT(ConnectionError, kOp, rank(), r,
                   "rank {} cannot reach rank {} over UCX: {} (UCX's log above names the transports it tried). The "
                   "ranks need a transport in common that can report a lost peer: compare UCX_TLS and "
                   "UCX_NET_DEVICES on both (here UCX_TLS={}); UCX_TLS=tcp,self works wherever TCP does",
                   rank(), r, ucs_status_string(status), effective_setting(settings_, "TLS", "all"));
    }
  }
}

void UcxMessagePipe::connect_self() {
  Peer& self = peers_[static_cast<size_t>(rank())];
  const std::vector<uint8_t> address = worker_address(worker_.get(), rank());
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  if (ucp_ep_create(worker_.get(), &params, &self.ep) != UCS_OK) self.ep = nullptr;  // the send fails, saying so
}

void UcxMessagePipe::greet_peers(net::Deadline until) {
  const auto start = net::Clock::now();
  const size_t n = static_cast<size_t>(size());
  const Greeting mine{rank(), size()};
  std::vector<Greeting> theirs(n);
  std::vector<GreetingOp> sent(n);
  std::vector<GreetingOp> received(n);
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) continue;
    const size_t i = static_cast<size_t>(r);
    post_recv(r, internal_tag(r, InternalMessage::Hello), kExactMask, &theirs[i], sizeof(Greeting),
              UCS_MEMORY_TYPE_HOST, RequestSlot::Kind::Recv, 0, &received[i]);
    post_send(r, internal_tag(rank(), InternalMessage::Hello), &mine, sizeof(Greeting), UCS_MEMORY_TYPE_HOST,
              RequestSlot::Kind::Send, 0, &sent[i]);
  }
  auto unfinished = [&] {
    std::vector<int> ranks;
    for (int r = 0; r < size(); ++r) {
      const size_t i = static_cast<size_t>(r);
      if (r != rank() && !(sent[i].finished && received[i].finished)) ranks.push_back(r);
    }
    return ranks;
  };
  while (!unfinished().empty() && net::Clock::now() < until) {
    if (progress() > 0) continue;
    if (arm()) sleep(until, true);
  }
  std::vector<int> silent = unfinished();
  // The greetings live on this stack: nothing may report to them after this.
  for (RequestSlot* s = pending_.next; s != &pending_; s = s->next) s->orphaned = true;
  for (int r = 0; r < size(); ++r) {
    const size_t i = static_cast<size_t>(r);
    for (const GreetingOp* op : {&sent[i], &received[i]}) {
      if (op->error) {
        try {
          std::rethrow_exception(op->error);
        } catch (const Error& e) {
          THD_THROW_AT(ConnectionError, "ucx backend set-up", rank(), r, "rank {} could not greet rank {}: {}", rank(),
                       r, e.message());
        }
      }
    }
    if (received[i].finished && (theirs[i].rank != r || theirs[i].world_size != size())) {
      THD_THROW_AT(ConnectionError, "ucx backend set-up", rank(), r,
                   "the UCX worker published as rank {} answered as rank {} of a world of {}, not rank {} of {}: is "
                   "the store shared with another job?",
                   r, theirs[i].rank, theirs[i].world_size, r, size());
    }
  }
  if (!silent.empty()) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(net::Clock::now() - start).count();
    THD_THROW_AT(TimeoutError, "ucx backend set-up", rank(), silent.size() == 1 ? silent.front() : -1,
                 "rank {} got the UCX addresses of every rank but could not exchange a greeting with rank{} {} "
                 "within {} ms: {} stuck, or unreachable over the transports in UCX_TLS={}?",
                 rank(), silent.size() == 1 ? "" : "s", fmt::join(silent, ", "), waited,
                 silent.size() == 1 ? "is it" : "are they", effective_setting(settings_, "TLS", "all"));
  }
}

UcxMessagePipe::~UcxMessagePipe() {
  free_spent();
  // From here on nobody is told anything: the ops' owner is going away too.
  std::vector<bool> sends_stuck(peers_.size(), false);
  std::vector<void*> requests;
  for (RequestSlot* slot = pending_.next; slot != &pending_; slot = slot->next) {
    slot->orphaned = true;
    if (slot->kind == RequestSlot::Kind::Send) sends_stuck[static_cast<size_t>(slot->peer)] = true;
    if (slot->kind == RequestSlot::Kind::Recv) requests.push_back(slot);
  }
  // Unmatched receives stop here; a matched one may still be written into until
  // the worker is destroyed below, which is before this returns.
  for (void* request : requests) ucp_request_cancel(worker_.get(), request);
  const net::Deadline until = net::deadline_after(settings_.close_timeout);
  say_goodbye(until);
  close_endpoints(sends_stuck, until);
  // Kept till now so the peers' goodbyes, which cross ours, find a receive (UCX
  // warns about messages nobody took).
  for (void*& request : goodbye_requests_) {
    if (request == nullptr) continue;
    slot_of(request).orphaned = true;
    ucp_request_cancel(worker_.get(), std::exchange(request, nullptr));
  }
  // Requests UCX still holds (matched receives, sends the peer never took) are
  // released here and dropped with the worker.
  while (pending_.next != &pending_) {
    RequestSlot* slot = pending_.next;
    unlink(*slot);
    ucp_request_free(slot);
  }
}

// ---- posting ----------------------------------------------------------------------

void UcxMessagePipe::throw_bad_peer(int peer, std::string_view what) const {
  THD_THROW(ValueError, kOp, "{}: peer {} is not another rank of this world of {} (this is rank {})", what, peer,
            size(), rank());
}

void UcxMessagePipe::send(int peer, uint32_t tag, std::span<const uint8_t> data, pipe::PipeOp* op) {
  check_peer(peer, "send");
  // A small send UCX finishes inside the call (eager, copied out) is reported
  // from it: the caller's request completes before its wait, without a progress
  // round.
  post_send(peer, user_tag(rank(), tag), data.data(), data.size(), UCS_MEMORY_TYPE_HOST, RequestSlot::Kind::Send, tag,
            op);
}

bool UcxMessagePipe::send_at_once(int peer, uint32_t tag, std::span<const uint8_t> data) {
  check_peer(peer, "send");
  return send_whole(peer, user_tag(rank(), tag), data);
}

bool UcxMessagePipe::send_tagged_at_once(int peer, uint64_t tag, std::span<const uint8_t> data) {
  if (peer == rank()) return false;  // send_tagged makes the endpoint to this rank
  check_peer(peer, "send");
  return send_whole(peer, tag, data);
}

bool UcxMessagePipe::send_whole(int peer, ucp_tag_t tag, std::span<const uint8_t> data) {
  const Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.error != nullptr || p.ep == nullptr) return false;
  // UCX's own short path: the message is copied into the transport inside the
  // call, or UCS_ERR_NO_RESOURCE comes back with nothing sent.
  const ucs_status_ptr_t request = ucp_tag_send_nbx(p.ep, data.data(), data.size(), tag, &at_once_param_);
  if (request == nullptr) return true;           // UCS_OK
  if (UCS_PTR_IS_ERR(request)) return false;     // send() sends it, or reports the error
  finish_stray_send(peer, data.size(), request);
  return true;
}

void UcxMessagePipe::finish_stray_send(int peer, size_t bytes, void* request) {
  const net::Deadline until = net::deadline_after(settings_.close_timeout);
  while (ucp_request_check_status(request) == UCS_INPROGRESS && net::Clock::now() < until) {
    ucp_worker_progress(worker_.get());
  }
  if (ucp_request_check_status(request) == UCS_INPROGRESS) {
    lose_peer(peer, fmt::format("a {}-byte send that UCX was told to finish at once stayed in flight for {} ms",
                                bytes, settings_.close_timeout.count()));
    settle_lost_peers();  // the forced close ends the send
  }
  ucp_request_free(request);
}

void UcxMessagePipe::recv(int peer, uint32_t tag, std::span<uint8_t> data, pipe::PipeOp* op) {
  check_peer(peer, "recv");
  post_recv(peer, user_tag(peer, tag), kExactMask, data.data(), data.size(), UCS_MEMORY_TYPE_HOST,
            RequestSlot::Kind::Recv, tag, op);
}

pipe::MessagePipe::NativeOrigin UcxMessagePipe::native_origin(uint64_t tag) const {
  if (collective_ && collective_->is_collective(tag)) return {collective_->sender_of(tag), detail::kRawBytes};
  const NativeFields f = unpack_native(tag);
  return {f.sender, f.dtype == kNativeRawBytes ? detail::kRawBytes : static_cast<uint8_t>(f.dtype)};
}

Envelope UcxMessagePipe::native_envelope(const Envelope& posted, uint64_t tag, size_t bytes) const {
  if (collective_ && collective_->is_collective(tag)) return collective_->arrival(posted, tag);
  return MessagePipe::native_envelope(posted, tag, bytes);
}

void UcxMessagePipe::send_tagged(int peer, uint64_t tag, std::span<const uint8_t> data, pipe::PipeOp* op) {
  if (peer != rank()) check_peer(peer, "send");
  if (peer == rank() && peers_[static_cast<size_t>(peer)].ep == nullptr) connect_self();
  post_send(peer, tag, data.data(), data.size(), UCS_MEMORY_TYPE_HOST, RequestSlot::Kind::Send,
            static_cast<uint32_t>(tag & kTagMask), op);
}

void UcxMessagePipe::recv_tagged(int peer, uint64_t tag, uint64_t mask, std::span<uint8_t> data,
                                 uint64_t* sender_tag, pipe::PipeOp* op) {
  if (peer != -1 && peer != rank()) check_peer(peer, "recv");
  post_recv(peer, tag, mask, data.data(), data.size(), UCS_MEMORY_TYPE_HOST, RequestSlot::Kind::Recv,
            static_cast<uint32_t>(tag & kTagMask), op, sender_tag);
}

bool UcxMessagePipe::send_direct(int peer, const Envelope& envelope, std::span<const uint8_t> data) {
  if (!fits_native(envelope, rank())) [[unlikely]] return false;
  return send_whole(peer, pack_native({native_dtype(envelope.kind.dtype), rank(), envelope.context / 2, envelope.tag}),
                    data);
}

bool UcxMessagePipe::recv_direct(int peer, const Envelope& envelope, std::span<uint8_t> data, DirectTags* tags,
                                 pipe::PipeOp* op) {
  if (!fits_native(envelope, peer)) [[unlikely]] return false;
  const auto match = ucx::native_match(envelope, peer);
  // The tag `peer`'s send_direct gives a message of this very envelope.
  tags->expected = pack_native({native_dtype(envelope.kind.dtype), peer, envelope.context / 2, envelope.tag});
  if (peers_[static_cast<size_t>(peer)].error != nullptr) [[unlikely]] {
    // What a lost peer sent before it went can still be taken (post_recv looks).
    post_recv(peer, match.tag, match.mask, data.data(), data.size(), UCS_MEMORY_TYPE_HOST, RequestSlot::Kind::Recv,
              static_cast<uint32_t>(envelope.tag), op, &tags->arrived);
    return true;
  }
  if (!spent_.empty()) free_spent();
  // No probe first: a message already here completes the receive inside the call
  // through the callback (UCP_OP_ATTR_FLAG_NO_IMM_CMPL), which gives its length
  // and tag as any completion does, so complete() reports it from the staged slot.
  RequestSlot slot{op, peer, static_cast<uint32_t>(envelope.tag), data.size(), RequestSlot::Kind::Recv};
  slot.sender_out = &tags->arrived;
  posting_ = &slot;
  adopt(ucp_tag_recv_nbx(worker_.get(), data.data(), data.size(), match.tag, match.mask, &direct_recv_param_), slot,
        0);
  return true;
}

std::optional<pipe::MessagePipe::Probed> UcxMessagePipe::probe_tagged(uint64_t tag, uint64_t mask) {
  ucp_tag_recv_info_t info{};
  if (ucp_tag_probe_nb(worker_.get(), tag, mask, 0, &info) == nullptr) return std::nullopt;
  return Probed{info.sender_tag, info.length};
}

void* UcxMessagePipe::post_send(int peer, ucp_tag_t tag, const void* data, size_t bytes, ucs_memory_type_t memory,
                                RequestSlot::Kind kind, uint32_t user_tag, pipe::PipeOp* op) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.error != nullptr || p.ep == nullptr) {
    if (op != nullptr) {
      std::exception_ptr error = p.error;
      if (error == nullptr) {
        error =
            std::make_exception_ptr(ConnectionError(fmt::format("rank {} has no UCX endpoint to rank {}", rank(), peer),
                                                    context_at("ucx send", rank(), peer, __FILE__, __LINE__)));
      }
      fail_at_once(op, std::move(error));
    }
    return nullptr;
  }
  RequestSlot slot{op, peer, user_tag, bytes, kind};
  slot.orphaned = op == nullptr;
  // Made once: a fresh one per send was a dozen stores on its latency path.
  ucp_request_param_t fresh;
  const ucp_request_param_t* param = &host_send_param_;
  if (memory != UCS_MEMORY_TYPE_HOST) {
    fresh = request_param(this, memory);
    fresh.cb.send = &UcxMessagePipe::on_send_done;
    param = &fresh;
  }
  posting_ = &slot;
  ucs_status_ptr_t request = ucp_tag_send_nbx(p.ep, data, bytes, tag, param);
  return adopt(request, slot, bytes);
}

void* UcxMessagePipe::post_recv(int peer, ucp_tag_t tag, ucp_tag_t mask, void* data, size_t bytes,
                                ucs_memory_type_t memory, RequestSlot::Kind kind, uint32_t user_tag, pipe::PipeOp* op,
                                ucp_tag_t* sender_out) {
  if (!spent_.empty()) free_spent();
  RequestSlot slot{op, peer, user_tag, bytes, kind};
  slot.sender_out = sender_out;
  // A message already here is taken through its probe handle: UCX 1.13 does not
  // report the length of a receive it completes at once, the probe does.
  ucp_tag_recv_info_t arrived{};
  ucp_tag_message_h message = ucp_tag_probe_nb(worker_.get(), tag, mask, 1, &arrived);
  if (message == nullptr && peer >= 0 && peers_[static_cast<size_t>(peer)].error != nullptr) {
    // A lost peer's messages that arrived can still be taken; nothing else will come.
    if (op != nullptr) fail_at_once(op, peers_[static_cast<size_t>(peer)].error);
    return nullptr;
  }
  ucp_request_param_t param = request_param(this, memory);
  param.cb.recv = &UcxMessagePipe::on_recv_done;
  posting_ = &slot;
  ucs_status_ptr_t request = message != nullptr ? ucp_tag_msg_recv_nbx(worker_.get(), data, bytes, message, &param)
                                                : ucp_tag_recv_nbx(worker_.get(), data, bytes, tag, mask, &param);
  return adopt(request, slot, arrived.length, arrived.sender_tag);
}

void* UcxMessagePipe::adopt(ucs_status_ptr_t request, const RequestSlot& slot, size_t length, ucp_tag_t sender_tag) {
  const bool completed_inside = posting_ == nullptr;  // complete() took the staged slot
  posting_ = nullptr;
  if (completed_inside) return nullptr;
  if (UCS_PTR_IS_PTR(request)) {
    RequestSlot& live = slot_of(request);
    live = slot;
    live.live = true;
    if (slot.op != nullptr) link(live);
    return request;
  }
  finish(slot, UCS_PTR_STATUS(request), length, sender_tag);
  return nullptr;
}

void UcxMessagePipe::post_goodbye_recv(int peer) {
  // One exact receive per peer rather than one for any sender: a receive posted
  // with a wildcard makes UCX search its whole expected queue for every message.
  void* request = post_recv(peer, internal_tag(peer, InternalMessage::Goodbye), kExactMask, nullptr, 0,
                            UCS_MEMORY_TYPE_HOST, RequestSlot::Kind::GoodbyeRecv, 0, nullptr);
  goodbye_requests_[static_cast<size_t>(peer)] = request;
}

void UcxMessagePipe::repost_goodbye_recvs() {
  std::vector<int> peers;
  peers.swap(goodbye_reposts_);
  for (int peer : peers) post_goodbye_recv(peer);
}

// ---- completion -------------------------------------------------------------------

void UcxMessagePipe::on_send_done(void* request, ucs_status_t status, void* user_data) noexcept {
  static_cast<UcxMessagePipe*>(user_data)->complete(request, status, 0, 0);
}

void UcxMessagePipe::on_recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                                  void* user_data) noexcept {
  const size_t length = info != nullptr ? info->length : 0;
  const ucp_tag_t sender_tag = info != nullptr ? info->sender_tag : 0;
  static_cast<UcxMessagePipe*>(user_data)->complete(request, status, length, sender_tag);
}

void UcxMessagePipe::on_direct_recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                                         void* user_data) noexcept {
  RequestSlot& held = slot_of(request);
  // complete()'s common case, for an op recv_direct posted: a live request's
  // message, whole. A message already here when the receive was posted completes
  // it inside ucp_tag_recv_nbx, before the request is live: complete() takes that.
  if (held.live && status == UCS_OK && !held.orphaned && info != nullptr) [[likely]] {
    auto* self = static_cast<UcxMessagePipe*>(user_data);
    auto* recv = static_cast<pipe::DirectRecv*>(held.op);
    self->unlink(held);
    ++self->completed_;
    held.live = false;
    self->retire(request);
    recv->arrived(info->sender_tag, info->length);
    return;
  }
  on_recv_done(request, status, info, user_data);
}

void UcxMessagePipe::complete(void* request, ucs_status_t status, size_t length, ucp_tag_t sender_tag) noexcept {
  RequestSlot& held = slot_of(request);
  // The common case first, without finish()'s cases: a live receive of an op
  // that succeeded (every message lands here once).
  if (held.live && status == UCS_OK && held.kind == RequestSlot::Kind::Recv && held.op != nullptr &&
      !held.orphaned) [[likely]] {
    unlink(held);  // a live request with an op is always listed
    ++completed_;
    if (held.sender_out != nullptr) *held.sender_out = sender_tag;
    held.op->done(nullptr, length);
    held.live = false;
    retire(request);
    return;
  }
  if (!held.live) {
    if (posting_ == nullptr) {  // not one of ours to report: never expected
      ucp_request_free(request);
      return;
    }
    // UCX completed the request inside the call that posts it (a truncated
    // rendezvous does): its slot is the one being posted.
    held = *posting_;
    posting_ = nullptr;
  }
  if (held.next != nullptr) unlink(held);
  // Reported from the request's own slot, which is freed after: done() makes no
  // pipe call, so nothing can reuse it meanwhile.
  if (held.withdrawing && status == UCS_ERR_CANCELED) {
    withdrawn_ = held.op;
  } else {
    finish(held, status, length, sender_tag);
  }
  held.live = false;  // UCX runs request_init once per request memory, not per use
  ucp_request_free(request);
}

void UcxMessagePipe::free_spent() noexcept {
  for (void* request : spent_) ucp_request_free(request);
  spent_.clear();
}

void UcxMessagePipe::finish(const RequestSlot& slot, ucs_status_t status, size_t length,
                            ucp_tag_t sender_tag) noexcept {
  switch (slot.kind) {
    case RequestSlot::Kind::GoodbyeRecv:
      goodbye_requests_[static_cast<size_t>(slot.peer)] = nullptr;
      // After its goodbye a peer is gone; anything else (bytes where a goodbye has
      // none) leaves it to be listened to again.
      if (status == UCS_OK) {
        goodbye_from(sender_tag);
      } else if (!slot.orphaned) {
        goodbye_reposts_.push_back(slot.peer);
      }
      return;
    case RequestSlot::Kind::GoodbyeSend:
      if (slot.live) --goodbyes_in_flight_;  // say_goodbye counted only those it got a request for
      return;
    case RequestSlot::Kind::Send:
    case RequestSlot::Kind::Recv:
      break;
  }
  if (slot.orphaned) return;
  ++completed_;
  // Only a receive that met a message has its tag: a cancelled one's info is
  // whatever UCX's request memory last held.
  if (slot.sender_out != nullptr && (status == UCS_OK || status == UCS_ERR_MESSAGE_TRUNCATED)) {
    *slot.sender_out = sender_tag;
  }
  if (status == UCS_OK) {
    slot.op->done(nullptr, slot.kind == RequestSlot::Kind::Send ? slot.bytes : length);
  } else {
    // A tagged receive's caller names both lengths of a message too long for it.
    const bool tagged_truncation = slot.sender_out != nullptr && status == UCS_ERR_MESSAGE_TRUNCATED;
    slot.op->done(failure(slot, status, length), tagged_truncation ? length : 0);
  }
}

void UcxMessagePipe::fail_at_once(pipe::PipeOp* op, std::exception_ptr error) noexcept {
  ++completed_;
  op->done(std::move(error), 0);
}

void UcxMessagePipe::link(RequestSlot& slot) noexcept {
  slot.prev = pending_.prev;
  slot.next = &pending_;
  pending_.prev->next = &slot;
  pending_.prev = &slot;
}

void UcxMessagePipe::unlink(RequestSlot& slot) noexcept {
  slot.prev->next = slot.next;
  slot.next->prev = slot.prev;
  slot.prev = slot.next = nullptr;
}

RequestSlot* UcxMessagePipe::find_pending(const pipe::PipeOp* op) noexcept {
  for (RequestSlot* s = pending_.next; s != &pending_; s = s->next) {
    if (s->op == op) return s;
  }
  return nullptr;
}

std::exception_ptr UcxMessagePipe::failure(const RequestSlot& slot, ucs_status_t status, size_t length) noexcept {
  const bool is_send = slot.kind == RequestSlot::Kind::Send;
  if (!is_send && status == UCS_ERR_MESSAGE_TRUNCATED) {
    // UCX reports the sender's length; it copied no more than the receive's room.
    const std::string size = length > slot.bytes ? fmt::format("of {} bytes ", length) : std::string();
    const std::string from = slot.peer >= 0 ? fmt::format("rank {}", slot.peer) : std::string("a rank");
    return std::make_exception_ptr(
        ValueError(fmt::format("the message {}from {} with tag {} is longer than the {} bytes its receive "
                               "has room for; nothing past them was written",
                               size, from, slot.tag, slot.bytes),
                   context_at("ucx recv", rank(), slot.peer, __FILE__, __LINE__)));
  }
  if (slot.peer < 0) {  // a tagged receive from any sender: no peer to blame
    return std::make_exception_ptr(ConnectionError(
        fmt::format("UCX failed the receive of {} bytes from any rank: {}", slot.bytes, ucs_status_string(status)),
        context_at("ucx recv", rank(), -1, __FILE__, __LINE__)));
  }
  Peer& peer = peers_[static_cast<size_t>(slot.peer)];
  if (peer.error == nullptr && is_send && is_endpoint_failure(status)) {
    lose_peer(slot.peer, fmt::format("a send to it failed: {}", ucs_status_string(status)));
  }
  if (peer.error != nullptr) return peer.error;
  if (!is_send && status == UCS_ERR_CANCELED) {
    return std::make_exception_ptr(
        Error(fmt::format("the receive from rank {} with tag {} was cancelled by UCX", slot.peer, slot.tag),
              context_at("ucx recv", rank(), slot.peer, __FILE__, __LINE__)));
  }
  return std::make_exception_ptr(ConnectionError(
      fmt::format("UCX failed the {} of {} bytes {} rank {} with tag {}: {}", is_send ? "send" : "receive", slot.bytes,
                  is_send ? "to" : "from", slot.peer, slot.tag, ucs_status_string(status)),
      context_at(is_send ? "ucx send" : "ucx recv", rank(), slot.peer, __FILE__, __LINE__)));
}

// ---- peers ------------------------------------------------------------------------

void UcxMessagePipe::on_peer_error(void* arg, ucp_ep_h, ucs_status_t status) noexcept {
  Peer* peer = static_cast<Peer*>(arg);
  peer->pipe->lose_peer(peer->rank, fmt::format("UCX reported its endpoint failed: {}", ucs_status_string(status)));
}

void UcxMessagePipe::goodbye_from(ucp_tag_t sender_tag) noexcept {
  const int sender = sender_of(sender_tag);
  if (sender < 0 || sender >= size() || sender == rank()) return;
  Peer& p = peers_[static_cast<size_t>(sender)];
  if (p.error == nullptr) p.departed = true;  // a goodbye after a failure changes nothing
  lose_peer(sender, "it closed its UCX pipe (goodbye received)");
}

void UcxMessagePipe::lose_peer(int peer, std::string why) noexcept {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.error != nullptr) return;
  p.error = std::make_exception_ptr(PeerLost(fmt::format("rank {} lost rank {}: {}", rank(), peer, why),
                                             context_at(kOp, rank(), peer, __FILE__, __LINE__)));
  newly_lost_.push_back(peer);
}

void UcxMessagePipe::settle_lost_peers() {
  while (!newly_lost_.empty()) {
    const int peer = newly_lost_.back();
    newly_lost_.pop_back();
    // UCX fails what goes through the endpoint (sends) but not receives, which
    // match by tag and would wait forever.
    std::vector<void*> waiting;
    for (RequestSlot* s = pending_.next; s != &pending_; s = s->next) {
      if (s->kind == RequestSlot::Kind::Recv && s->peer == peer) waiting.push_back(s);
    }
    // Their UCS_ERR_CANCELED completions report the peer's PeerLost (failure()).
    for (void* request : waiting) ucp_request_cancel(worker_.get(), request);
    // Closing the endpoint ends the sends still on it (UCS_ERR_CANCELED, reported
    // as the peer's PeerLost) and is what UCX asks after an endpoint error.
    Peer& p = peers_[static_cast<size_t>(peer)];
    if (p.ep != nullptr) {
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t request = ucp_ep_close_nbx(std::exchange(p.ep, nullptr), &param);
      if (UCS_PTR_IS_PTR(request)) ucp_request_free(request);
    }
  }
}

void UcxMessagePipe::peer_lost(int peer, std::string_view why) {
  check_peer(peer, "peer_lost");
  lose_peer(peer, std::string(why));
}

std::exception_ptr UcxMessagePipe::peer_error(int peer) const {
  if (peer < 0 || peer >= size()) return nullptr;
  return peers_[static_cast<size_t>(peer)].error;
}

bool UcxMessagePipe::peer_departed(int peer) const {
  if (peer < 0 || peer >= size()) return false;
  return peers_[static_cast<size_t>(peer)].departed;
}

// ---- cancel -----------------------------------------------------------------------

bool UcxMessagePipe::cancel(pipe::PipeOp* op) {
  RequestSlot* pending = find_pending(op);
  if (pending == nullptr) return false;  // finished: its done() was called
  void* request = pending;
  // UCX 1.13 withdraws only receives not yet matched; a send runs to its end.
  if (slot_of(request).kind != RequestSlot::Kind::Recv) return false;
  withdrawn_ = nullptr;
  slot_of(request).withdrawing = true;
  ucp_request_cancel(worker_.get(), request);
  if (withdrawn_ == op) {
    withdrawn_ = nullptr;
    return true;
  }
  // Matched (or handed to a tag-offloading NIC): it completes, and is reported.
  if (RequestSlot* again = find_pending(op); again != nullptr) again->withdrawing = false;
  return false;
}

void UcxMessagePipe::forget(pipe::PipeOp* op) noexcept {
  // Still listed, so that the destructor frees the request, but with no op: a
  // later op at the same address is not mistaken for it.
  if (RequestSlot* pending = find_pending(op); pending != nullptr) {
    pending->orphaned = true;
    pending->op = nullptr;
  }
}

// ---- progress and sleep -----------------------------------------------------------

bool UcxMessagePipe::drive_worker() {
  // Once, not until idle: the callers loop themselves, and a second, idle round
  // after the one that brought a message sat on every round trip's latency path.
  return ucp_worker_progress(worker_.get()) != 0;
}

int UcxMessagePipe::progress() {
  completed_ = 0;
  drive_worker();
  if (!goodbye_reposts_.empty()) repost_goodbye_recvs();
  if (!newly_lost_.empty()) settle_lost_peers();
  return completed_;
}

bool UcxMessagePipe::arm() {
  if (!newly_lost_.empty() || !goodbye_reposts_.empty()) return false;
  free_spent();  // nothing is held while the pipe sleeps
  const ucs_status_t status = ucp_worker_arm(worker_.get());
  if (status == UCS_OK) return true;
  if (status == UCS_ERR_BUSY) return false;
  if (!wakeup_broken_.exchange(true)) {
    THD_LOG_WARN("{} (rank {}): ucp_worker_arm failed ({}); sleeping in 1 ms slices from now on", kOp, rank(),
                 ucs_status_string(status));
  }
  return true;
}

void UcxMessagePipe::sleep(net::Deadline until, bool /*busy*/) {
  // The worker's fd wakes this for transfers in flight too, so `busy` needs no
  // polling of its own here.
  std::array<pollfd, 2> fds{{{worker_fd_, POLLIN, 0}, {interrupt_fd_.get(), POLLIN, 0}}};
  int timeout = net::poll_timeout_ms(until);
  if (wakeup_broken_.load(std::memory_order_relaxed) && (timeout < 0 || timeout > 1)) timeout = 1;
  if (::poll(fds.data(), fds.size(), timeout) > 0 && (fds[1].revents & POLLIN) != 0) {
    uint64_t count = 0;
    [[maybe_unused]] ssize_t r = ::read(interrupt_fd_.get(), &count, sizeof(count));
  }
}

void UcxMessagePipe::interrupt() noexcept {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(interrupt_fd_.get(), &one, sizeof(one));
}

// ---- shutdown ---------------------------------------------------------------------

void UcxMessagePipe::wait_briefly(net::Deadline until) {
  if (!goodbye_reposts_.empty()) repost_goodbye_recvs();
  if (drive_worker()) return;
  if (ucp_worker_arm(worker_.get()) != UCS_OK) return;
  pollfd fd{worker_fd_, POLLIN, 0};
  const auto slice = std::min(until, net::Clock::now() + kCloseSlice);
  ::poll(&fd, 1, net::poll_timeout_ms(slice));
}

void UcxMessagePipe::say_goodbye(net::Deadline until) {
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) continue;
    if (post_send(r, internal_tag(rank(), InternalMessage::Goodbye), nullptr, 0, UCS_MEMORY_TYPE_HOST,
                  RequestSlot::Kind::GoodbyeSend, 0, nullptr) != nullptr) {
      ++goodbyes_in_flight_;
    }
  }
  while (goodbyes_in_flight_ > 0 && net::Clock::now() < until) wait_briefly(until);
}

void UcxMessagePipe::close_endpoints(const std::vector<bool>& sends_stuck, net::Deadline until) {
  std::vector<void*> closing;
  for (Peer& p : peers_) {
    if (p.ep == nullptr) continue;
    ucp_request_param_t param{};
    // Flushing would wait for sends the peer may never take; those endpoints,
    // and failed ones, are dropped at once.
    if (p.error != nullptr || sends_stuck[static_cast<size_t>(p.rank)]) {
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    }
    ucs_status_ptr_t request = ucp_ep_close_nbx(std::exchange(p.ep, nullptr), &param);
    if (UCS_PTR_IS_PTR(request)) closing.push_back(request);
  }
  auto still_closing = [&] {
    std::erase_if(closing, [](void* request) {
      if (ucp_request_check_status(request) == UCS_INPROGRESS) return false;
      ucp_request_free(request);
      return true;
    });
    return !closing.empty();
  };
  while (still_closing() && net::Clock::now() < until) wait_briefly(until);
  for (void* request : closing) ucp_request_free(request);
}

}  // namespace thd::detail::ucx
