// thd::Stream, thd::Event, StreamScope and current_stream on the master: each call
// is a command for the stream's or the event's node (docs/streams.md).
#include <fmt/format.h>

#include <mutex>

#include <thd/distributed.h>
#include <thd/stream.h>

#include "datachannel/check.h"
#include "master/emit.h"
#include "master/graph.h"
#include "master/stream_handle.h"
#include "protocol/framing.h"
#include "tensor/check.h"
#include "tensor/log.h"

namespace thd {

namespace master {

// The session a stream or event belongs to, or ValueError (it ended).
std::shared_ptr<Session> live_session(const std::weak_ptr<Session>& weak, const char* op, const char* what) {
  auto s = weak.lock();
  if (!s) {
    THD_THROW(ValueError, op,
              "the {} belongs to a session that has ended (thd::shutdown() or a lost master-worker session): "
              "streams and events do not carry over to a new session; create them again in this one",
              what);
  }
  return s;
}

namespace {

// Both halves of a stream-event call in one live session, or which one is not.
std::shared_ptr<Session> live_pair(const std::weak_ptr<Session>& stream, const std::weak_ptr<Session>& event,
                                   const char* op) {
  auto s = live_session(stream, op, "stream");
  if (live_session(event, op, "event") != s) {
    THD_THROW(ValueError, op, "the stream and the event belong to different sessions");
  }
  return s;
}

}  // namespace

namespace {

std::shared_ptr<StreamHandle> default_handle(const std::shared_ptr<Session>& s, int node, const char* op) {
  s->link(node, op);  // IndexError for a node out of range
  return std::make_shared<StreamHandle>(s, node, 0, Stream::Priority::Normal);
}

}  // namespace

StreamHandle::~StreamHandle() {
  if (id == 0) return;
  auto s = session.lock();
  if (!s) return;  // the session ended: its workers dropped every stream
  s->close_stream(node);
  try {
    s->link(node, "~Stream").append_on(0, fb::Op::StreamDestroy,
                                       [&](auto& b) { return fb::CreateStreamDestroy(b, id).Union(); });
  } catch (const std::exception& e) {
    THD_LOG_DEBUG("master: destroying stream {} of node {}: {}", id, node, e.what());
  }
}

EventHandle::~EventHandle() {
  const int n = node();
  if (n < 0) return;
  auto s = session.lock();
  if (!s) return;
  try {
    s->link(n, "~Event").append_on(0, fb::Op::EventDestroy, [&](auto& b) {
      const uint64_t ids[] = {id};
      return fb::CreateEventDestroy(b, b.CreateVector(ids, 1)).Union();
    });
  } catch (const std::exception& e) {
    THD_LOG_DEBUG("master: destroying event {} on node {}: {}", id, n, e.what());
  }
}

int EventHandle::bind(int node) {
  std::lock_guard lock(mu_);
  if (node_ >= 0 && node_ != node) {
    THD_THROW(ValueError, "Event::record",
              "the event was recorded on node {}; an event belongs to one node (record a new event on node {})",
              node_, node);
  }
  node_ = node;
  return node_;
}

int EventHandle::node() const {
  std::lock_guard lock(mu_);
  return node_;
}

uint32_t Session::open_stream(int node) {
  std::lock_guard lock(mu_);
  int& live = live_streams_[static_cast<size_t>(node)];
  if (live >= options_.max_streams_per_node) {
    THD_THROW_AT(ValueError, "Stream::create", 0, node + 1,
                 "node {} has {} streams, the most a node may have at once (MasterWorkerOptions::"
                 "max_streams_per_node); a stream is destroyed when its last thd::Stream handle goes, so drop "
                 "streams no longer used, or raise the limit (at most {})",
                 node, live, protocol::kMaxStreamsPerNode);
  }
  ++live;
  return ++next_stream_[static_cast<size_t>(node)];
}

void Session::close_stream(int node) {
  std::lock_guard lock(mu_);
  --live_streams_[static_cast<size_t>(node)];
}

namespace {

// Sends a query built by `build` on its own fetch tag and returns the node's
// EventStatus (a round trip; WorkerLost for a lost node).
template <typename Build>
const fb::EventStatus& ask(Session& s, NodeLink& l, int64_t tag, const char* op, protocol::PostedMessage& answer,
                           fb::Op type, Build&& build, std::chrono::milliseconds timeout) {
  l.append_on(0, type, [&](auto& b) { return build(b, tag).Union(); });
  l.flush();
  const fb::Message* m = nullptr;
  try {
    m = &protocol::verify_message(answer.wait(), "master");
  } catch (const PeerLost& e) {
    l.on_lost(worker_lost(l.node(), e));
    l.throw_if_lost();
  } catch (const TimeoutError&) {
    THD_THROW_AT(TimeoutError, op, 0, l.rank(), "worker node {} did not answer within {} ms", l.node(),
                 timeout.count());
  }
  const fb::EventStatus* status = m->body_as_EventStatus();
  if (status == nullptr) {
    THD_THROW_AT(protocol::ProtocolError, op, 0, l.rank(), "worker node {} answered with a {} message", l.node(),
                 fb::EnumNameBody(m->body_type()));
  }
  (void)s;
  return *status;
}

}  // namespace

Session::EventReport Session::query_event(int node, uint64_t event, bool wait, const char* op) {
  check_not_capturing(op);
  NodeLink& l = link(node, op);
  l.throw_if_lost();
  const int64_t tag = next_fetch_tag();
  protocol::PostedMessage answer(*channel_, l.rank(), tag, options_.timeout);
  const fb::EventStatus& status = ask(*this, l, tag, op, answer, fb::Op::EventQuery,
                                      [&](auto& b, int64_t t) { return fb::CreateEventQuery(b, event, t, wait); },
                                      options_.timeout);
  if (status.event() != event) {
    THD_THROW_AT(protocol::ProtocolError, op, 0, node + 1, "worker node {} answered a query of event {} with another",
                 node, event);
  }
  EventReport r{status.complete(), status.recorded(), status.time_ns(), nullptr};
  if (status.failed()) {
    const std::string name = status.op_name() ? status.op_name()->str() : "op";
    const std::string text = status.message() ? status.message()->str() : "";
    r.failure = remote_error(status.node(), status.op_id(), name, text, status.kind(), status.graph(), status.replay());
    std::lock_guard lock(mu_);
    mark_raised_locked(status.node(), status.op_id(), status.replay());
  }
  return r;
}

bool Session::query_stream(int node, uint32_t stream) {
  check_not_capturing("Stream::query");
  NodeLink& l = link(node, "Stream::query");
  l.throw_if_lost();
  const int64_t tag = next_fetch_tag();
  protocol::PostedMessage answer(*channel_, l.rank(), tag, options_.timeout);
  return ask(*this, l, tag, "Stream::query", answer, fb::Op::StreamQuery,
             [&](auto& b, int64_t t) { return fb::CreateStreamQuery(b, stream, t); }, options_.timeout)
      .complete();
}

}  // namespace master

// ---- Stream ------------------------------------------------------------------------------

Stream::Stream() : Stream(current_stream()) {}

Stream Stream::create(Priority priority) { return create(current_node(), priority); }

Stream Stream::create(int node, Priority priority) {
  auto s = master::current_session("Stream::create");
  master::NodeLink& l = s->link(node, "Stream::create");
  const uint32_t id = s->open_stream(node);
  l.append_on(0, master::fb::Op::StreamCreate, [&](auto& b) {
    return master::fb::CreateStreamCreate(b, id, priority == Priority::High).Union();
  });
  return Stream(std::make_shared<master::StreamHandle>(s, node, id, priority));
}

Stream Stream::default_stream(std::optional<int> node) {
  auto s = master::current_session("Stream::default_stream");
  return Stream(master::default_handle(s, node.value_or(current_node()), "Stream::default_stream"));
}

int Stream::node() const { return handle_->node; }
uint32_t Stream::id() const { return handle_->id; }
Stream::Priority Stream::priority() const { return handle_->priority; }

void Stream::synchronize() const {
  master::check_not_capturing("Stream::synchronize");
  Event done;
  done.record(*this);
  done.synchronize();
}

bool Stream::query() const {
  auto s = master::live_session(handle_->session, "Stream::query", "stream");
  return s->query_stream(node(), id());
}

Event Stream::record() const {
  Event e;
  e.record(*this);
  return e;
}

void Stream::wait(const Event& event) const {
  auto s = master::live_pair(handle_->session, event.handle_->session, "Stream::wait");
  const int from = event.handle_->node();
  if (from < 0) return;  // never recorded: nothing to wait for (CUDA)
  const uint64_t id = event.handle_->id;
  if (from == node()) {
    s->link(node(), "Stream::wait").append_on(this->id(), master::fb::Op::EventWait, [&](auto& b) {
      return master::fb::CreateEventWait(b, id).Union();
    });
    return;
  }
  // Across nodes: the event's node tells this one directly once the record has run.
  const int64_t tag = s->next_transfer_tag();
  master::NodeLink& owner = s->link(from, "Stream::wait");
  // Both halves under the cross-node lock, as to_node's and the collectives': were a
  // collective issued by another thread to land between them (after the wait on
  // this node, before the notify request on the event's), this node's command loop
  // would hold the collective until the waiting stream drains (legacy default
  // stream), while the event's node sat in the collective and never read the
  // request that would release the wait.
  std::lock_guard lock(s->cross_node_mutex());
  owner.append_on(0, master::fb::Op::EventNotify,
                  [&](auto& b) { return master::fb::CreateEventNotify(b, id, node(), tag).Union(); });
  owner.flush();
  s->link(node(), "Stream::wait").append_on(this->id(), master::fb::Op::EventWaitRemote, [&](auto& b) {
    return master::fb::CreateEventWaitRemote(b, from, tag).Union();
  });
}

Stream current_stream(std::optional<int> node) {
  const int n = node.value_or(current_node());
  if (auto h = master::scoped_stream_handle(n)) return Stream(std::move(h));
  auto s = master::current_session("current_stream");
  return Stream(master::default_handle(s, n, "current_stream"));
}

StreamScope::StreamScope(const Stream& stream) : previous_node_(master::exchange_scoped_node(stream.node())) {
  master::push_stream_scope(stream.handle_);
}

StreamScope::~StreamScope() {
  master::pop_stream_scope();
  master::exchange_scoped_node(previous_node_);
}

// ---- Event --------------------------------------------------------------------------------

Event::Event(bool enable_timing) {
  auto s = master::current_session("Event");
  handle_ = std::make_shared<master::EventHandle>(s, s->next_event_id(), enable_timing);
}

void Event::record() { record(current_stream()); }

void Event::record(const Stream& stream) {
  auto s = master::live_pair(stream.handle_->session, handle_->session, "Event::record");
  handle_->bind(stream.node());
  const uint64_t id = handle_->id;
  const bool timed = handle_->timing;
  s->link(stream.node(), "Event::record").append_on(stream.id(), master::fb::Op::EventRecord, [&](auto& b) {
    return master::fb::CreateEventRecord(b, id, timed).Union();
  });
}

bool Event::query() const {
  const int n = handle_->node();
  if (n < 0) return true;
  auto s = master::live_session(handle_->session, "Event::query", "event");
  return s->query_event(n, handle_->id, /*wait=*/false, "Event::query").complete;
}

void Event::synchronize() const {
  const int n = handle_->node();
  if (n < 0) return;
  auto s = master::live_session(handle_->session, "Event::synchronize", "event");
  auto r = s->query_event(n, handle_->id, /*wait=*/true, "Event::synchronize");
  if (r.failure) std::rethrow_exception(r.failure);
}

float Event::elapsed_time(const Event& end) const {
  const char* op = "Event::elapsed_time";
  if (!timing() || !end.timing()) {
    THD_THROW(ValueError, op, "both events need timing: make them with thd::Event(/*enable_timing=*/true)");
  }
  const int n = handle_->node();
  const int m = end.handle_->node();
  if (n < 0 || m < 0) THD_THROW(ValueError, op, "both events must have been recorded");
  if (n != m) {
    THD_THROW(ValueError, op, "the events were recorded on nodes {} and {}: times compare only on one node", n, m);
  }
  auto s = master::live_session(handle_->session, op, "event");
  const auto a = s->query_event(n, handle_->id, /*wait=*/false, op);
  const auto b = s->query_event(n, end.handle_->id, /*wait=*/false, op);
  if (!a.complete || !b.complete) {
    THD_THROW(ValueError, op, "an event has not completed yet: synchronize() it first (CUDA's cudaErrorNotReady)");
  }
  return static_cast<float>(static_cast<double>(b.time_ns - a.time_ns) / 1e6);
}

std::optional<int> Event::node() const {
  const int n = handle_->node();
  if (n < 0) return std::nullopt;
  return n;
}

bool Event::timing() const { return handle_->timing; }

int64_t detail::event_time_ns(const Event& event) {
  const int n = event.handle_->node();
  if (n < 0) return 0;
  auto s = master::live_session(event.handle_->session, "event_time_ns", "event");
  const auto r = s->query_event(n, event.handle_->id, /*wait=*/false, "event_time_ns");
  return r.recorded ? r.time_ns : 0;
}

}  // namespace thd
