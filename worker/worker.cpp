// The worker's command loop: one master session, batches verified before they are
// read, executed in order, failures turned into poison and error replies.
#include "worker/worker.h"

#include "protocol/codec.h"
#include "protocol/framing.h"
#include "tensor/check.h"
#include "tensor/log.h"
#include "worker/graphs.h"
#include "worker/ops.h"
#include "worker/session.h"
#include "worker/sizes.h"

namespace thd::worker {

namespace {

using protocol::fb::Body;

constexpr std::chrono::milliseconds kPoll{1000};
// A replay asks whether its master is lost before every this many commands.
constexpr size_t kMasterLostEvery = 64;

void reply_error(ExecContext& ctx, const std::string& what, const std::string& message) {
  flatbuffers::FlatBufferBuilder b(256);
  auto body = fb::CreateOpFailed(b, 0, b.CreateString(what), b.CreateString(message));
  b.Finish(fb::CreateMessage(b, protocol::kVersion, Body::OpFailed, body.Union()));
  ctx.reply({b.GetBufferPointer(), b.GetSize()});
}

void reply_hello(ExecContext& ctx, bool accepted, const std::string& error) {
  flatbuffers::FlatBufferBuilder b(128);
  auto body = fb::CreateHelloReply(b, protocol::kVersion, ctx.node(), accepted, b.CreateString(error));
  b.Finish(fb::CreateMessage(b, protocol::kVersion, Body::HelloReply, body.Union()));
  ctx.reply({b.GetBufferPointer(), b.GetSize()});
}

// Posts the receives of the batch's uploads at once, straight into their tensors,
// so the bytes that follow the batch land without a staging copy (and, for large
// ones, the master's rendezvous is answered as soon as the batch is read).
void post_uploads(Session& session, const fb::CommandBatch& batch) {
  for (const fb::Command* c : *batch.commands()) {
    const fb::Upload* up = c->op_as_Upload();
    if (up == nullptr) continue;
    try {
      const UploadSpec spec = upload_spec(session, *up);
      Tensor t = Tensor::empty(spec.shape, spec.dtype);
      Request r = session.channel().irecv(t, 0, {.tag = protocol::kUploadTag, .timeout = session.timeout()});
      session.post_upload(up->out(), std::move(t), std::move(r));
    } catch (const std::exception&) {
      // Left unannounced: the Upload command then fails (saying why) and poisons its
      // tensor. Its bytes still come, on the tag every upload shares: an empty
      // receive takes them in their place (refusing their size, it drops them
      // without buffering them), or the next upload's receive would get them.
      try {
        (void)session.channel().irecv_bytes({}, 0, {.tag = protocol::kUploadTag, .timeout = session.timeout()});
      } catch (const std::exception&) {
        // The channel itself failed: the session ends on the next receive anyway.
      }
    }
  }
}

// What the command loop works out for a command when it reads it: its place in
// the order of records of an event, of waits on them, and of collectives.
Prepared prepare(Session& session, const fb::Command& c) {
  switch (c.op_type()) {
    case fb::Op::EventRecord:
      if (const auto* op = c.op_as_EventRecord()) {
        auto event = session.events().get(op->event());
        const uint64_t generation = event->issue();
        return {generation, std::move(event)};
      }
      return {};
    case fb::Op::EventWait:
      if (const auto* op = c.op_as_EventWait()) {
        auto event = session.events().get(op->event());
        const uint64_t generation = event->issued();
        return {generation, std::move(event)};
      }
      return {};
    case fb::Op::Collective:
      return {session.next_collective_turn(), nullptr};
    default:
      return {};
  }
}

// A command that cannot run where it was sent: reported, and the turn it held (a
// collective's) passed on. A refused get is answered where its master waits.
void refuse(Session& session, const fb::Command& c, const Prepared& prepared, const std::string& message,
            ErrorKind kind) {
  ExecContext& main = session.streams().default_stream();
  main.begin(c, Prepared{.value = 0, .event = nullptr, .graph = prepared.graph, .index = prepared.index});
  const std::shared_ptr<const Poison> poison = main.new_poison(message, kind);
  const fb::Fetch* fetch = c.op_as_Fetch();
  main.fail(poison, /*report=*/fetch == nullptr);
  if (fetch != nullptr) answer_fetch_failed(main, *fetch, *poison);
  if (c.op_type() == fb::Op::Collective) session.end_turn(prepared.value);
}

// Runs or queues one command (docs/streams.md, "Where commands run"): control
// commands at once on this thread; default-stream commands on this thread once
// every other stream has run what it holds (CUDA's legacy default stream); the
// others on their stream's executor.
void schedule(Session& session, const std::shared_ptr<const Message>& holder, const fb::Command& c,
              const GraphRun* graph = nullptr, uint32_t index = 0);

// A replay of a graph whose commands all run on the default stream, run here and
// now. The wait for the node's other streams (CUDA's legacy default stream, as
// schedule() does it for each such command) is done once for the whole replay:
// while the command loop runs it, nothing gives those streams more work.
void replay_on_default_stream(Session& session, const std::vector<const fb::Command*>& commands,
                              const GraphRun* run) {
  ExecContext& main = session.streams().default_stream();
  auto prepared_of = [&](const fb::Command& c, size_t index) {
    Prepared p = prepare(session, c);
    p.graph = run;
    p.index = static_cast<uint32_t>(index);
    return p;
  };
  if (!session.streams().idle() && !session.drain_streams()) {
    const std::string why = fmt::format(
        "the default stream of node {} waited {} ms for the node's other streams to finish, and they finished no op "
        "meanwhile",
        session.node(), session.timeout().count());
    for (size_t i = 0; i < commands.size(); ++i) {
      refuse(session, *commands[i], prepared_of(*commands[i], i), why, ErrorKind::Timeout);
    }
    return;
  }
  GpuStreams::Use on(main.gpu());  // CUDA's legacy default stream, noting the GPUs used
  KeptPlans& plans = run->graph->plans();
  for (size_t i = 0; i < commands.size(); ++i) {
    if (i % kMasterLostEvery == 0 && session.master_lost()) return;
    // A command whose tensors are as on its previous replay runs the plan it kept
    // then. An inherited failure poisons what it would write, and a trace records
    // each op: both take the usual path.
    if (!main.inherited() && session.recorder() == nullptr && plans.run(i, session.table())) {
      // Counted as dispatch() counts an op, once it is done: nothing else watches
      // this thread's op while it runs.
      session.count_op();
      session.op_finished();
      continue;
    }
    const fb::Command& c = *commands[i];
    if (is_control(c.op_type())) {
      dispatch(main, c, Prepared{.value = 0, .event = nullptr, .graph = run, .index = static_cast<uint32_t>(i)});
      continue;
    }
    Prepared prepared = prepared_of(c, i);
    const bool collective = c.op_type() == fb::Op::Collective;
    const uint64_t turn = prepared.value;
    dispatch(main, c, std::move(prepared));
    if (collective) session.end_turn(turn);
  }
}

// A replay of a graph (docs/graphs.md): its commands, verified when it was defined,
// scheduled here and now as if the master had issued them in place of the replay,
// each on its stream. The holder every stream keeps while it runs one of them
// keeps this replay and its graph alive (a DropGraph meanwhile frees neither).
void replay(Session& session, const fb::Command& c) {
  const fb::ReplayGraph* op = c.op_as_ReplayGraph();
  if (op == nullptr) {
    refuse(session, c, {}, "command names an op but carries no arguments", ErrorKind::Value);
    return;
  }
  const GraphTable::Found found = session.graphs().find(op->graph());
  if (!found.known) {
    refuse(session, c, {},
           fmt::format("graph {} is not defined on node {} (it was reset, or captured in another session)",
                       op->graph(), session.node()),
           ErrorKind::Value);
    return;
  }
  // A definition the node refused was reported once, and poisoned the graph's tensors.
  if (!found.graph) return;
  auto run = std::make_shared<GraphRun>(GraphRun{found.graph, op->replay()});
  const std::vector<const fb::Command*>& commands = found.graph->commands();
  // The hazard checker follows each command through schedule().
  if (found.graph->default_stream_only() && session.check() == nullptr) {
    replay_on_default_stream(session, commands, run.get());
    return;
  }
  const std::shared_ptr<const Message> holder(run, &found.graph->message());
  for (size_t i = 0; i < commands.size(); ++i) {
    // Asking whether the master is lost reads a clock: once in a while is enough for
    // a replay of tiny ops, which takes microseconds per hundred.
    if (i % kMasterLostEvery == 0 && session.master_lost()) return;
    schedule(session, holder, *commands[i], run.get(), static_cast<uint32_t>(i));
  }
}

void schedule(Session& session, const std::shared_ptr<const Message>& holder, const fb::Command& c,
              const GraphRun* graph, uint32_t index) {
  ExecContext& main = session.streams().default_stream();
  if (c.op_type() == fb::Op::ReplayGraph) {
    replay(session, c);
    return;
  }
  if (is_control(c.op_type())) {
    dispatch(main, c, Prepared{.value = 0, .event = nullptr, .graph = graph, .index = index});
    if (c.op_type() == fb::Op::DefineGraph) answer_definition(session, c);
    return;
  }
  Prepared prepared = prepare(session, c);
  prepared.graph = graph;
  prepared.index = index;
  const bool collective = c.op_type() == fb::Op::Collective;
  const uint64_t turn = prepared.value;
  if (c.stream() == 0) {
    if (!session.streams().idle() && !session.drain_streams()) {
      refuse(session, c, prepared,
             fmt::format("the default stream of node {} waited {} ms for the node's other streams to finish, and "
                         "they finished no op meanwhile",
                         session.node(), session.timeout().count()),
             ErrorKind::Timeout);
      return;
    }
    if (StreamCheck* check = session.check()) {
      // Legacy default stream: it comes after everything the other streams ran.
      session.streams().for_each_context([&](ExecContext& other) {
        if (other.stream() != 0) {
          check->checker().on_wait(check->key(0), check->checker().clock(check->key(other.stream())));
        }
      });
    }
    {
      GpuStreams::Use on(main.gpu());  // CUDA's legacy default stream, noting the GPUs used
      dispatch(main, c, std::move(prepared));
    }
    if (collective) session.end_turn(turn);
    return;
  }
  StreamEntry* stream = nullptr;
  try {
    stream = &session.streams().get(c.stream());
  } catch (const Error& e) {
    refuse(session, c, prepared, e.what(), error_kind_of(e));
    return;
  }
  // ... and the other streams after what the default stream ran before this.
  std::shared_ptr<const streams::VectorClock> after_default;
  if (StreamCheck* check = session.check()) {
    after_default = std::make_shared<const streams::VectorClock>(check->checker().clock(check->key(0)));
  }
  stream->executor.submit([holder, &c, stream, &session, prepared = std::move(prepared), collective, turn,
                           after_default]() mutable {
    // A session that is ending (its master is lost; one that said goodbye has
    // synchronized first) drops what its streams still hold: nobody is left to use
    // the results, and the node must be free for what comes next (thd-worker's
    // next session, or an SPMD worker's exit).
    if (session.stopping() || session.master_lost()) {
      if (collective) session.end_turn(turn);
      return;
    }
    if (after_default) session.check()->checker().on_wait(session.check()->key(stream->ctx.stream()), *after_default);
    try {
      GpuStreams::Use on(stream->ctx.gpu());  // the stream's own CUDA streams
      dispatch(stream->ctx, c, std::move(prepared));
    } catch (const PeerLost&) {
      // The master is gone: the command loop ends the session.
    }
    if (collective) session.end_turn(turn);
  });
}

// The batch's frees (verify_message checked their places), in the order they were
// issued among its commands: before(i) frees those placed before command i.
class BatchFrees {
 public:
  BatchFrees(Session& session, const fb::CommandBatch& batch)
      : session_(session), ids_(protocol::scalars_of(batch.frees())), places_(batch.free_before()),
        op_id_(batch.free_op()) {}

  void before(size_t index) {
    if (next_ == ids_.size() || places_->Get(static_cast<flatbuffers::uoffset_t>(next_)) != index) return;
    size_t end = next_ + 1;
    while (end < ids_.size() && places_->Get(static_cast<flatbuffers::uoffset_t>(end)) == index) ++end;
    const std::span<const uint64_t> ids(ids_.data() + next_, end - next_);
    next_ = end;
    if (const uint64_t unknown = free_tensors(session_, ids, op_id_)) {
      ExecContext& main = session_.streams().default_stream();
      main.fail_outside_command(std::make_shared<const Poison>(
          Poison{op_id_, "free",
                 fmt::format("tensor id {} is not live on node {} (freed twice, or never created)", unknown,
                             session_.node()),
                 session_.node(), ErrorKind::Value}));
    }
  }

 private:
  Session& session_;
  const std::vector<uint64_t> ids_;
  const flatbuffers::Vector<uint32_t>* places_;
  const uint64_t op_id_;
  size_t next_ = 0;
};

void run_batch(Session& session, const std::shared_ptr<const Message>& holder,
               const fb::CommandBatch& batch) {
  BatchFrees frees(session, batch);
  size_t index = 0;
  if (batch.commands() != nullptr) {
    post_uploads(session, batch);
    for (const fb::Command* c : *batch.commands()) {
      // A master lost mid-batch wants none of the rest (a batch may hold seconds of
      // work); the command loop then finds it lost and ends the session.
      if (session.master_lost()) return;
      frees.before(index++);
      schedule(session, holder, *c);
    }
  }
  frees.before(index);
  if (batch.want_ack()) {
    // Once the whole batch has run, on every stream: the master's credits bound what
    // the node holds queued, not only what it has read.
    const uint64_t seq = batch.seq();
    session.streams().after_current_work([&session, seq] {
      flatbuffers::FlatBufferBuilder b(64);
      auto body = fb::CreateAck(b, seq);
      b.Finish(fb::CreateMessage(b, protocol::kVersion, Body::Ack, body.Union()));
      try {
        session.reply({b.GetBufferPointer(), b.GetSize()});
      } catch (const std::exception& e) {
        THD_LOG_DEBUG("worker node {}: ack of batch {} not sent: {}", session.node(), seq, e.what());
      }
    });
  }
}

bool is_master_lost(const PeerLost& e) { return e.context().peer == 0; }

}  // namespace

const char* session_end_name(SessionEnd end) {
  switch (end) {
    case SessionEnd::Goodbye: return "goodbye";
    case SessionEnd::MasterLost: return "master lost";
    case SessionEnd::Refused: return "refused";
  }
  return "unknown";
}

SessionEnd serve(const std::shared_ptr<DataChannel>& channel, const SessionLimits& limits) {
  Session session(channel, limits);
  ExecContext& ctx = session.streams().default_stream();
  protocol::MessageReceiver commands(channel, 0, protocol::kCommandTag, protocol::kMaxMessageBytes);
  auto m = std::make_shared<Message>();
  try {
    for (;;) {
      // A message whose commands some stream still holds stays theirs.
      if (m.use_count() > 1) m = std::make_shared<Message>();
      try {
        if (!commands.next(*m, kPoll)) continue;
      } catch (const protocol::ProtocolError& e) {
        reply_error(ctx, "receive", e.what());
        continue;
      }
      const fb::Message* message = nullptr;
      try {
        message = &protocol::verify_message(*m, "worker");
      } catch (const protocol::ProtocolError& e) {
        reply_error(ctx, "verify", e.what());
        continue;
      }
      switch (message->body_type()) {
        case Body::Hello: {
          const fb::Hello* h = message->body_as_Hello();
          if (h->version() != protocol::kVersion || h->node() != ctx.node() ||
              h->num_nodes() != channel->size() - 1) {
            reply_hello(ctx, false,
                        fmt::format("worker node {} of {} (protocol {}) cannot serve a master that expects node {} of "
                                    "{} (protocol {})",
                                    ctx.node(), channel->size() - 1, protocol::kVersion, h->node(), h->num_nodes(),
                                    h->version()));
            return SessionEnd::Refused;
          }
          session.seed_all(h->seed());
          session.open_notice_board(h->session());
          if (h->trace()) session.enable_trace();
          reply_hello(ctx, true, "");
          session.start_progress_reports();
          break;
        }
        case Body::Goodbye:
          return SessionEnd::Goodbye;
        case Body::CommandBatch:
          run_batch(session, m, *message->body_as_CommandBatch());
          break;
        case Body::NONE:
        case Body::HelloReply:
        case Body::Ack:
        case Body::OpFailed:
        case Body::FetchFailed:
        case Body::SyncDone:
        case Body::EventStatus:
        case Body::EventNotice:
        case Body::NodeStats:
        case Body::ClockSample:
        case Body::Progress:
          reply_error(ctx, "receive",
                      fmt::format("a worker does not accept {} messages", fb::EnumNameBody(message->body_type())));
          break;
      }
    }
  } catch (const PeerLost& e) {
    if (!is_master_lost(e)) throw;
    THD_LOG_INFO("worker node {}: master lost ({}); ending the session", ctx.node(), e.what());
    return SessionEnd::MasterLost;
  }
}

}  // namespace thd::worker
