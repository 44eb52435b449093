// Streams and events (docs/streams.md): creating and destroying streams, recording
// events, waits on events of this node and of other nodes, and the master's queries.
#include <fmt/format.h>

#include <thd/memory.h>

#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "protocol/framing.h"
#include "tensor/check.h"
#include "tensor/log.h"
#include "worker/devices.h"
#include "worker/notice_board.h"
#include "worker/ops.h"
#include "worker/session.h"

namespace thd::worker {

namespace {

constexpr size_t kMaxNoticeBytes = size_t{64} << 10;
// How long a stream waiting for another node's event polls for the notice before
// it blocks: long enough to cover a wait issued just before its record (a master's
// round trip or two), short enough that a long wait costs at most this much of a
// core, which it gives away whenever another thread wants it.
constexpr std::chrono::microseconds kRemoteEventYieldSpin{1000};
// A waiter asleep on its notice board looks at the message this often (a bell
// wakes it at once): only a bell overwritten by another wait sharing the slot
// leaves it to find the message this way.
constexpr std::chrono::microseconds kBoardNap{2000};

flatbuffers::Offset<flatbuffers::String> text(flatbuffers::FlatBufferBuilder& b, const Poison* p, bool message) {
  if (p == nullptr) return b.CreateString("");
  return b.CreateString(message ? p->message : p->op_name);
}

ErrorKind kind_of(const Poison* p) { return p != nullptr ? p->kind : ErrorKind::Generic; }

void send_status(Session& session, uint64_t event, int64_t reply_tag, uint64_t awaited,
                 const EventState::Record& r) {
  flatbuffers::FlatBufferBuilder b(256);
  const Poison* p = r.poison.get();
  auto body = fb::CreateEventStatus(b, event, r.generation >= awaited, r.generation > 0, r.time_ns, p != nullptr,
                                    p != nullptr ? p->op_id : 0, text(b, p, false), text(b, p, true),
                                    p != nullptr ? p->node : -1, protocol::to_fb(kind_of(p)),
                                    p != nullptr ? p->graph : 0, p != nullptr ? p->replay : 0);
  b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::EventStatus, body.Union()));
  protocol::send_message(session.channel(), 0, reply_tag, {b.GetBufferPointer(), b.GetSize()}, session.timeout());
}

// The notice of another node's event (a stream waiting on it), or nullopt when
// the waiting node's notice board said the record ran and did not fail first.
// The notice is one small message that the record sends the moment it completes:
// poll for it (yielding) for a while before blocking, as a CUDA stream's wait
// with cudaDeviceScheduleYield would. A blocked waiter costs this VM 20-50 us of
// wake-ups on the latency path (docs/performance.md, "Streams suite").
std::optional<Message> await_notice(ExecContext& ctx, int peer, int64_t tag) {
  Session& session = ctx.session();
  NoticeBoard* board = session.notice_board();
  if (board == nullptr || session.peer_notice_board(peer) == nullptr) {  // another host: the message alone
    return protocol::recv_message(ctx.channel(), peer + 1, tag, kMaxNoticeBytes, ctx.timeout(),
                                  kRemoteEventYieldSpin);
  }
  auto notice =
      std::make_unique<protocol::PostedMessage>(ctx.channel(), peer + 1, tag, ctx.timeout(), kMaxNoticeBytes);
  // The message lands by itself (the channel's poller or progress thread): these
  // loops only look. First polling, giving the core away between looks; then
  // asleep on the slot, which the ring wakes (looking at the message between naps,
  // in case the bell was overwritten by a wait whose tag shares the slot).
  const auto spin_end = std::chrono::steady_clock::now() + kRemoteEventYieldSpin;
  NoticeBoard::Doorbell bell = NoticeBoard::Doorbell::Silent;
  while (bell == NoticeBoard::Doorbell::Silent && !notice->test() && !session.stopping()) {
    if (std::chrono::steady_clock::now() < spin_end) {
      bell = board->take(tag);
      if (bell == NoticeBoard::Doorbell::Silent) std::this_thread::yield();
    } else {
      bell = board->wait_for(tag, kBoardNap);
    }
  }
  if (bell == NoticeBoard::Doorbell::Done) {
    session.keep_late_notice(std::move(notice));
    return std::nullopt;
  }
  // The message came first: its record rang before sending it, so that bell is in
  // the slot now, and must not answer this tag's next wait (a graph's next replay).
  if (bell == NoticeBoard::Doorbell::Silent) board->take(tag);
  return notice->wait_message();
}

}  // namespace

void run(ExecContext& ctx, const fb::StreamCreate& op) {
  ctx.session().streams().create(op.stream(), op.high_priority());
  if (trace::Recorder* rec = ctx.session().recorder()) {
    rec->name_track(ctx.session().trace_pid(), static_cast<int32_t>(op.stream()),
                    fmt::format("stream {}{}", op.stream(), op.high_priority() ? " (high priority)" : ""),
                    static_cast<int32_t>(op.stream()));
  }
}

void run(ExecContext& ctx, const fb::StreamDestroy& op) { ctx.session().streams().destroy(op.stream()); }

void run(ExecContext& ctx, const fb::EventRecord&) {
  // The record's generation was issued when the command was read; the stream has
  // now run everything before it.
  const Prepared& p = ctx.prepared();
  if (!p.event) THD_THROW(protocol::ProtocolError, "Event::record", "the record was not prepared");
  std::shared_ptr<const streams::VectorClock> clock;
  if (StreamCheck* check = ctx.session().check()) {
    clock = std::make_shared<const streams::VectorClock>(check->checker().on_record(check->key(ctx.stream())));
  }
  if (ctx.gpu().used()) {
    // The stream queued GPU work: the record completes when the GPU has done it (on
    // the completion thread), timed by a CUDA event.
    ctx.gpu().when_gpu_done([event = p.event, generation = p.value, stream = ctx.stream(), poison = ctx.first_error(),
                             clock = std::move(clock)](std::shared_ptr<const GpuMark> mark) mutable {
      int64_t time_ns = 0;
      try {
        if (mark) time_ns = mark->time_ns();
      } catch (const std::exception& e) {
        THD_LOG_WARN("worker: event record timed by the host clock: {}", e.what());
      }
      for (const auto& fn : event->complete(generation, stream, std::move(poison), std::move(clock), time_ns)) fn();
    });
    return;
  }
  auto due = p.event->complete(p.value, ctx.stream(), ctx.first_error(), std::move(clock));
  if (due.empty()) return;
  auto run_all = [due = std::move(due)] {
    for (const auto& fn : due) fn();
  };
  if (ctx.stream() == 0) {
    run_all();
    return;
  }
  // After this task counts as done: whoever the callbacks tell (a master waiting in
  // Stream::synchronize, say) then finds the stream past the record.
  // running(), not get(): the master may have destroyed the stream since it
  // queued the record, which still runs (and the record's completion may yield
  // the core to the command loop that handles the destroy).
  streams::Executor& executor = ctx.session().streams().running(ctx).executor;
  executor.when_completed(executor.completed() + 1, std::move(run_all));
}

void run(ExecContext& ctx, const fb::EventWait& op) {
  const Prepared& p = ctx.prepared();
  if (!p.event || p.value == 0) return;  // never recorded: no wait (as in CUDA)
  Session& session = ctx.session();
  const auto deadline = std::chrono::steady_clock::now() + ctx.timeout();
  if (!p.event->wait(p.value, deadline, [&] { return session.stopping(); })) {
    THD_THROW(TimeoutError, "Stream::wait", "stream {} of node {} waited {} ms for event {} (its record did not run)",
              ctx.stream(), ctx.node(), ctx.timeout().count(), op.event());
  }
  const EventState::Record r = p.event->latest();
  if (trace::Recorder* rec = session.recorder()) {
    // The arrow starts inside the record's slice, when the record ran.
    const uint64_t id = event_flow_id(op.event(), r.generation);
    rec->flow(id, session.trace_pid(), static_cast<int32_t>(r.stream), r.time_ns, trace::FlowPhase::Begin);
    ctx.flow(id, /*begin=*/false);
  }
  ctx.inherit(r.poison);
  if (StreamCheck* check = session.check(); check != nullptr && r.clock) {
    check->checker().on_wait(check->key(ctx.stream()), *r.clock);
  }
}

void run(ExecContext& ctx, const fb::EventNotify& op) {
  check_peer(ctx, op.peer_node(), "Stream::wait");
  check_transfer_tag(op.tag(), "Stream::wait");
  auto event = ctx.session().events().get(op.event());
  Session& session = ctx.session();
  const int peer = op.peer_node();
  const int64_t tag = op.tag();
  const uint64_t id = op.event();
  const uint64_t awaited = event->issued();
  if (NoticeBoard* board = session.peer_notice_board(peer)) {
    // The moment the record ran, before its stream's task ends and long before the
    // message: a waiter on this host goes on at the bell.
    event->at_record(awaited, [board, tag](const EventState::Record& r) {
      board->ring(tag, !r.poison && !r.clock ? NoticeBoard::Doorbell::Done : NoticeBoard::Doorbell::ReadNotice);
      // The waiting stream may be queued on this very core, yielding.
      std::this_thread::yield();
    });
  }
  // Sent by whichever thread completes the record (or now, when it has run): the
  // waiting node hears from this one directly, not through the master.
  event->when_complete(awaited, [&session, peer, tag, id](const EventState::Record& r) {
    if (trace::Recorder* rec = session.recorder(); rec != nullptr && r.generation > 0) {
      // The arrow to the waiting node starts inside the record's slice.
      rec->flow(static_cast<uint64_t>(tag), session.trace_pid(), static_cast<int32_t>(r.stream), r.time_ns,
                trace::FlowPhase::Begin);
    }
    if (const uint64_t hold = session.notice_hold_latch(); hold != 0 && !session.wait_latch(hold, session.timeout())) {
      THD_LOG_WARN("worker node {}: the notice of event {} was held past the latch's timeout", session.node(), id);
    }
    const Poison* p = r.poison.get();
    flatbuffers::FlatBufferBuilder b(256);
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> clock;
    if (r.clock) clock = b.CreateVector(r.clock->serialize());
    auto body = fb::CreateEventNotice(b, id, p != nullptr, p != nullptr ? p->op_id : 0, text(b, p, false),
                                      text(b, p, true), p != nullptr ? p->node : -1, clock,
                                      protocol::to_fb(kind_of(p)), p != nullptr ? p->graph : 0,
                                      p != nullptr ? p->replay : 0);
    b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::EventNotice, body.Union()));
    try {
      protocol::send_message(session.channel(), peer + 1, tag, {b.GetBufferPointer(), b.GetSize()},
                             session.timeout());
    } catch (const std::exception& e) {
      // The waiting stream times out with its own error.
      THD_LOG_WARN("worker node {}: could not tell node {} that event {} completed: {}", session.node(), peer, id,
                   e.what());
    }
  });
}

void run(ExecContext& ctx, const fb::EventWaitRemote& op) {
  check_peer(ctx, op.peer_node(), "Stream::wait");
  check_transfer_tag(op.tag(), "Stream::wait");
  const std::optional<Message> bytes = await_notice(ctx, op.peer_node(), op.tag());
  if (!bytes) {  // the board's bell: the record ran and did not fail
    ctx.flow(static_cast<uint64_t>(op.tag()), /*begin=*/false);
    return;
  }
  const fb::Message& m = protocol::verify_message(*bytes, "worker");
  ctx.flow(static_cast<uint64_t>(op.tag()), /*begin=*/false);
  const fb::EventNotice* notice = m.body_as_EventNotice();
  if (notice == nullptr) {
    THD_THROW(protocol::ProtocolError, "Stream::wait", "node {} answered an event wait with a {} message",
              op.peer_node(), fb::EnumNameBody(m.body_type()));
  }
  if (StreamCheck* check = ctx.session().check(); check != nullptr && notice->clock() != nullptr) {
    check->checker().on_wait(check->key(ctx.stream()),
                             streams::VectorClock::deserialize({notice->clock()->data(), notice->clock()->size()}));
  }
  if (notice->failed()) {
    ctx.inherit(std::make_shared<const Poison>(
        Poison{notice->op_id(), notice->op_name() != nullptr ? notice->op_name()->str() : "op",
               notice->message() != nullptr ? notice->message()->str() : "", notice->node(),
               protocol::from_fb(notice->kind()), notice->graph(), notice->replay()}));
  }
}

void run(ExecContext& ctx, const fb::EventQuery& op) {
  if (!protocol::is_fetch_tag(op.reply_tag())) {
    THD_THROW(protocol::ProtocolError, "Event::query", "event reply tag {} is outside the fetch range",
              op.reply_tag());
  }
  Session& session = ctx.session();
  auto event = session.events().get(op.event());
  const uint64_t awaited = event->issued();
  const uint64_t id = op.event();
  const int64_t tag = op.reply_tag();
  if (!op.wait()) {
    send_status(session, id, tag, awaited, event->latest());
    return;
  }
  event->when_complete(awaited, [&session, id, tag, awaited](const EventState::Record& r) {
    // The master learns the record has run: what it issues next comes after it.
    if (StreamCheck* check = session.check(); check != nullptr && r.clock) check->checker().on_host_wait(*r.clock);
    try {
      send_status(session, id, tag, awaited, r);
    } catch (const std::exception& e) {
      THD_LOG_WARN("worker node {}: could not answer the master's wait on event {}: {}", session.node(), id,
                   e.what());
    }
  });
}

void run(ExecContext& ctx, const fb::StreamQuery& op) {
  if (!protocol::is_fetch_tag(op.reply_tag())) {
    THD_THROW(protocol::ProtocolError, "Stream::query", "stream reply tag {} is outside the fetch range",
              op.reply_tag());
  }
  Session& session = ctx.session();
  // The default stream's ops have run (this thread runs them); it is done when the
  // others are (legacy semantics).
  bool done = false;
  if (op.stream() == 0) {
    done = session.streams().idle();
    if (done) session.streams().for_each_context([&](ExecContext& c) { done = done && c.gpu().idle(); });
  } else {
    StreamEntry& s = session.streams().get(op.stream());
    done = s.executor.queued() == 0 && s.ctx.gpu().idle();
  }
  EventState::Record r;
  r.generation = done ? 1 : 0;
  send_status(session, 0, op.reply_tag(), 1, r);
}

void run(ExecContext& ctx, const fb::StatsQuery& op) {
  if (!protocol::is_fetch_tag(op.reply_tag())) {
    THD_THROW(protocol::ProtocolError, "stats", "stats reply tag {} is outside the fetch range", op.reply_tag());
  }
  Session& session = ctx.session();
  flatbuffers::FlatBufferBuilder b(512);
  std::vector<flatbuffers::Offset<fb::StreamLoad>> loads;
  // The default stream's ops run on the command loop, so none are ever queued.
  loads.push_back(fb::CreateStreamLoad(b, 0, 0));
  for (const auto& [stream, queued] : session.streams().queued()) loads.push_back(fb::CreateStreamLoad(b, stream, queued));
  const ChannelTraffic traffic = session.channel().traffic();
  const MemoryStats memory = memory_stats();
  // Every GPU of the node; those this session never used hold none of its memory.
  const int gpus = cuda_device_count();
  std::vector<fb::DeviceMemory> devices;
  for (int i = 0; i < gpus; ++i) devices.emplace_back(i, 0, 0);
  for (int i : session.used_devices()) {
    if (i >= gpus) continue;
    const MemoryStats m = memory_stats(Device::cuda(i));
    devices[static_cast<size_t>(i)] = fb::DeviceMemory(i, m.allocated_bytes, m.peak_allocated_bytes);
  }
  auto body = fb::CreateNodeStats(b, session.node(), session.ops_executed(), b.CreateVector(loads), traffic.bytes_sent,
                                  traffic.bytes_received, traffic.messages_sent, traffic.messages_received,
                                  memory.allocated_bytes, memory.peak_allocated_bytes, session.table().size(),
                                  session.events().size(), gpus, b.CreateVectorOfStructs(devices));
  b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::NodeStats, body.Union()));
  protocol::send_message(session.channel(), 0, op.reply_tag(), {b.GetBufferPointer(), b.GetSize()}, ctx.timeout());
}

void run(ExecContext& ctx, const fb::ClockQuery& op) {
  if (!protocol::is_fetch_tag(op.reply_tag())) {
    THD_THROW(protocol::ProtocolError, "clock", "clock reply tag {} is outside the fetch range", op.reply_tag());
  }
  flatbuffers::FlatBufferBuilder b(64);
  auto body = fb::CreateClockSample(b, trace::now_ns());
  b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::ClockSample, body.Union()));
  protocol::send_message(ctx.channel(), 0, op.reply_tag(), {b.GetBufferPointer(), b.GetSize()}, ctx.timeout());
}

void run(ExecContext& ctx, const fb::TraceDump& op) {
  if (!protocol::is_fetch_tag(op.reply_tag())) {
    THD_THROW(protocol::ProtocolError, "trace", "trace reply tag {} is outside the fetch range", op.reply_tag());
  }
  trace::Recorder* rec = ctx.session().recorder();
  const std::vector<uint8_t> bytes = rec != nullptr ? rec->serialize() : trace::Recorder(false).serialize();
  protocol::send_message(ctx.channel(), 0, op.reply_tag(), bytes, ctx.timeout());
}

void run(ExecContext& ctx, const fb::EventDestroy& op) {
  if (op.events() == nullptr) return;
  for (uint64_t id : protocol::scalars_of(op.events())) ctx.session().events().erase(id);
}

}  // namespace thd::worker
