// DataChannel point to point: checks, then one transport message.
#include <fmt/format.h>

#include <string_view>

#include <thd/datachannel.h>

#include "datachannel/channel_util.h"
#include "datachannel/check.h"

namespace thd {

namespace {

using detail::Envelope;
using detail::GroupState;
using detail::MessageKind;
using detail::MessageOp;

constexpr int64_t kMaxP2PTag = INT64_MAX;

MessageKind bytes_kind(size_t n) { return {MessageOp::P2P, detail::kRawBytes, 0, -1, n}; }

// A contiguous host tensor as one message: its bytes and kind, each of the
// tensor's accessors called once (they are calls into the tensor library).
struct TensorMessage {
  std::span<uint8_t> bytes;
  MessageKind kind;
};
TensorMessage message_of(const Tensor& t) {
  const int64_t n = t.numel();
  const size_t nbytes = static_cast<size_t>(n) * element_size(t.dtype());
  auto* data = static_cast<uint8_t*>(n == 0 ? nullptr : t.data_ptr());
  return {{data, nbytes}, {MessageOp::P2P, static_cast<uint8_t>(t.dtype()), 0, -1, static_cast<uint64_t>(n)}};
}

// The tensor a send takes its bytes from: the caller's own when it is
// contiguous, else a contiguous copy made in `copy`. Not tensor.contiguous(),
// which copies the handle (its shape and strides, two allocations) even when it
// returns the same tensor: on an 8-byte round trip's latency path, that and the
// accessors called several times were ~700 instructions before the send.
const Tensor& contiguous_source(const Tensor& tensor, Tensor& copy) {
  if (tensor.is_contiguous()) return tensor;
  copy = tensor.clone();
  return copy;
}

[[noreturn]] void throw_self(const GroupState& g, int peer, std::string_view op, std::string_view what) {
  THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1,
               "{} rank {} is this process's own rank: a rank cannot {} itself (the message would never be "
               "matched); copy the tensor instead",
               what, peer, what == "destination" ? "send to" : "receive from");
}

// As torch.distributed: a message to or from oneself is refused at the call.
void check_not_self(const GroupState& g, int peer, std::string_view op, std::string_view what) {
  if (peer != g.rank || peer < 0) [[likely]] return;
  throw_self(g, peer, op, what);
}

// The checks every point-to-point call makes before anything is posted; returns
// the peer's world rank (kAnySource stays kAnySource).
int checked_peer(const GroupState& g, int peer, std::string_view op, std::string_view what, bool any_ok,
                 int64_t tag) {
  detail::check_member(g, op);
  detail::check_rank(g, peer, op, what, any_ok);
  check_not_self(g, peer, op, what);
  detail::check_tag(g, tag, op, kMaxP2PTag);
  return peer == kAnySource ? kAnySource : (*g.world_ranks)[peer];
}

detail::RequestSpec p2p_spec(const GroupState& g, detail::OpLabel op, const P2POptions& o, const Tensor* keep) {
  return {std::move(op),
          net::coarse_deadline_after(detail::resolve_timeout(g, o.timeout)),
          g.world_rank(),
          o.passive_wait,
          o.yield_spin,
          keep};
}

// The spec of a request its call waits for before it returns: its deadline is
// counted from the wait's first clock read (RequestSpec::timeout_from_wait), which
// a wait that ends at once or within a spin's first rounds never makes.
// The label is made in place (`label_of` a prvalue): moving it in cost a string's
// move and destruction a message.
template <typename Label>
detail::RequestSpec waited_spec(const GroupState& g, Label label_of, const P2POptions& o, const Tensor* keep) {
  return {label_of(), {}, g.world_rank(), o.passive_wait, o.yield_spin, keep, detail::resolve_timeout(g, o.timeout)};
}

// A small message the transport hands to its library within the call
// (Transport::send_now): no request, no request maker. `world_dst` is checked.
bool send_at_once(GroupState& g, std::span<const uint8_t> data, MessageKind kind, int world_dst,
                  const P2POptions& o) {
  if (!g.transport->send_now(data, world_dst, Envelope{detail::p2p_context(g.id), o.tag, kind})) return false;
  g.transport->count_send(data.size());
  return true;
}

// Sends through Transport::send_blocking, which makes the request (through
// `make`) only when the message does not leave within the call; null when it
// left. What send, send_bytes and isend share after send_at_once; `world_dst` is
// `dst` checked (checked_peer).
// `waited`: the caller waits for the request before it returns (send, send_bytes).
std::shared_ptr<detail::RequestState> send_lazily(GroupState& g, std::span<const uint8_t> data, MessageKind kind,
                                                  int dst, int world_dst, const P2POptions& o, const Tensor* keep,
                                                  bool waited) {
  struct Context {
    GroupState* g;
    int dst;
    const P2POptions* o;
    const Tensor* keep;
    bool waited;
  };
  const Context context{&g, dst, &o, keep, waited};
  // Only when the send has to be waited for.
  const detail::RequestMaker make{[](const void* p) {
                                    const Context& c = *static_cast<const Context*>(p);
                                    auto label = [&] { return detail::OpLabel::send_to(c.dst, c.o->tag); };
                                    return detail::make_request(*c.g,
                                                                c.waited ? waited_spec(*c.g, label, *c.o, c.keep)
                                                                         : p2p_spec(*c.g, label(), *c.o, c.keep),
                                                                c.g->transport.get());
                                  },
                                  &context};
  const Envelope env{detail::p2p_context(g.id), o.tag, kind};
  auto req = g.transport->send_blocking(data, world_dst, env, make);
  // Counted once the message is on its way: the counters' atomic adds are not
  // worth a place on a round trip's latency path.
  g.transport->count_send(data.size());
  return req;
}

// A blocking send waits for the request send_lazily made, if it made one. A wait
// the host's interrupt check ends leaves a send of raw bytes withdrawn, as it
// reads the caller's memory; a tensor's send keeps its storage and goes on.
void wait_for(std::shared_ptr<detail::RequestState> request, bool keeps_its_memory) {
  if (!request) return;
  const Request r(std::move(request));
  try {
    r.wait();
  } catch (...) {
    if (!keeps_its_memory && !r.test()) r.cancel(std::current_exception());
    throw;
  }
}

// isend: a message that leaves within the call gets its (finished) request made
// afterwards, off the latency path of an irecv/isend/wait exchange, where making
// it first (a clock read, the request's memory and fields) came before the send.
Request post_send(GroupState& g, std::string_view op, std::span<const uint8_t> data, MessageKind kind, int dst,
                  const P2POptions& o, const Tensor* keep) {
  const int world_dst = checked_peer(g, dst, op, "destination", /*any_ok=*/false, o.tag);
  std::shared_ptr<detail::RequestState> req;
  if (!send_at_once(g, data, kind, world_dst, o)) req = send_lazily(g, data, kind, dst, world_dst, o, keep, false);
  if (!req) {
    req = detail::make_request(g, p2p_spec(g, detail::OpLabel::send_to(dst, o.tag), o, nullptr), g.transport.get());
    req->complete(-1, data.size());
  }
  return Request(std::move(req));
}

Request post_recv(GroupState& g, std::string_view op, std::span<uint8_t> data, MessageKind kind, int src,
                  const P2POptions& o, const Tensor* keep) {
  const int world_src = checked_peer(g, src, op, "source", /*any_ok=*/true, o.tag);
  const detail::OpLabel label = detail::OpLabel::recv_from(src == kAnySource ? -1 : src, o.tag);
  auto req = detail::make_request(g, p2p_spec(g, label, o, keep), g.transport.get());
  const Envelope env{detail::p2p_context(g.id), o.tag, kind};
  g.transport->count_recv(data.size());
  g.transport->post_recv(data, world_src, env, req);
  return Request(std::move(req));
}

// A receive the caller waits for at once: the transport may keep its request on
// its stack (Transport::recv_blocking). Returns the source's rank in the group.
int recv_and_wait(GroupState& g, std::string_view op, std::span<uint8_t> data, MessageKind kind, int src,
                  const P2POptions& o, const Tensor* keep) {
  const int world_src = checked_peer(g, src, op, "source", /*any_ok=*/true, o.tag);
  const Envelope env{detail::p2p_context(g.id), o.tag, kind};
  g.transport->count_recv(data.size());
  const int world_source = g.transport->recv_blocking(
      data, world_src, env,
      waited_spec(g, [&] { return detail::OpLabel::recv_from(src == kAnySource ? -1 : src, o.tag); }, o, keep));
  return g.id == 0 ? world_source : detail::position_in(*g.world_ranks, world_source);
}

}  // namespace

Request DataChannel::isend(const Tensor& tensor, int dst, const P2POptions& options) {
  if (detail::on_device(tensor)) {
    check_not_self(state(), dst, "isend", "destination");
    return detail::device_collectives(state(), "send").send(state(), tensor, dst, options);
  }
  detail::check_tensor(state(), tensor, "send", "the tensor", /*must_be_contiguous=*/false);
  // A strided tensor goes as a contiguous copy; the request keeps the tensor sent alive.
  Tensor copy;
  const Tensor& src = contiguous_source(tensor, copy);
  const TensorMessage m = message_of(src);
  return post_send(state(), "isend", m.bytes, m.kind, dst, options, &src);
}

Request DataChannel::irecv(Tensor& tensor, int src, const P2POptions& options) {
  if (detail::on_device(tensor)) {
    check_not_self(state(), src, "irecv", "source");
    return detail::device_collectives(state(), "recv").recv(state(), tensor, src, options);
  }
  detail::check_tensor(state(), tensor, "recv", "the tensor", /*must_be_contiguous=*/true);
  const TensorMessage m = message_of(tensor);
  return post_recv(state(), "irecv", m.bytes, m.kind, src, options, &tensor);
}

Request DataChannel::isend_bytes(std::span<const uint8_t> data, int dst, const P2POptions& options) {
  return post_send(state(), "isend_bytes", data, bytes_kind(data.size()), dst, options, nullptr);
}

Request DataChannel::irecv_bytes(std::span<uint8_t> data, int src, const P2POptions& options) {
  return post_recv(state(), "irecv_bytes", data, bytes_kind(data.size()), src, options, nullptr);
}

void DataChannel::send(const Tensor& tensor, int dst, const P2POptions& options) {
  if (detail::on_device(tensor)) {
    check_not_self(state(), dst, "send", "destination");
    isend(tensor, dst, options).wait();
    return;
  }
  detail::check_tensor(state(), tensor, "send", "the tensor", /*must_be_contiguous=*/false);
  Tensor copy;
  const Tensor& src = contiguous_source(tensor, copy);
  const TensorMessage m = message_of(src);
  GroupState& g = state();
  const int world_dst = checked_peer(g, dst, "send", "destination", /*any_ok=*/false, options.tag);
  if (send_at_once(g, m.bytes, m.kind, world_dst, options)) return;
  wait_for(send_lazily(g, m.bytes, m.kind, dst, world_dst, options, &src, /*waited=*/true),
           /*keeps_its_memory=*/true);
}

int DataChannel::recv(Tensor& tensor, int src, const P2POptions& options) {
  if (detail::on_device(tensor)) {
    check_not_self(state(), src, "recv", "source");
    Request r = irecv(tensor, src, options);
    r.wait();
    return r.source();
  }
  detail::check_tensor(state(), tensor, "recv", "the tensor", /*must_be_contiguous=*/true);
  const TensorMessage m = message_of(tensor);
  return recv_and_wait(state(), "recv", m.bytes, m.kind, src, options, &tensor);
}

void DataChannel::send_bytes(std::span<const uint8_t> data, int dst, const P2POptions& options) {
  GroupState& g = state();
  const MessageKind kind = bytes_kind(data.size());
  const int world_dst = checked_peer(g, dst, "send_bytes", "destination", /*any_ok=*/false, options.tag);
  if (send_at_once(g, data, kind, world_dst, options)) return;
  wait_for(send_lazily(g, data, kind, dst, world_dst, options, nullptr, /*waited=*/true), /*keeps_its_memory=*/false);
}

int DataChannel::recv_bytes(std::span<uint8_t> data, int src, const P2POptions& options) {
  return recv_and_wait(state(), "recv_bytes", data, bytes_kind(data.size()), src, options, nullptr);
}

Request DataChannel::irecv_message(int src, size_t max_bytes, const P2POptions& options) {
  GroupState& g = state();
  const int world_src = checked_peer(g, src, "irecv_message", "source", /*any_ok=*/true, options.tag);
  const detail::OpLabel label = detail::OpLabel::recv_from(src == kAnySource ? -1 : src, options.tag);
  auto req = detail::make_request(g, p2p_spec(g, label, options, nullptr), g.transport.get());
  req->any_length = true;
  req->length_limit = max_bytes;
  // The kind's count is the message's length, which only the match tells.
  const Envelope env{detail::p2p_context(g.id), options.tag, bytes_kind(0)};
  g.transport->post_recv({}, world_src, env, req);
  return Request(std::move(req));
}

Message DataChannel::recv_message(int src, size_t max_bytes, const P2POptions& options) {
  const Request r = irecv_message(src, max_bytes, options);
  r.wait();
  return r.take_message();
}

}  // namespace thd
