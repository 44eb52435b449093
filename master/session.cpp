#include "master/session.h"

#include "master/block_pool.h"
#include "master/graph.h"
#include "master/interruptible_wait.h"

#include "datachannel/check.h"
#include "datachannel/net/thread_name.h"
#include "datachannel/runtime_queries.h"
#include "protocol/framing.h"
#include "tensor/log.h"

namespace thd::master {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kReplyPoll{100};
// The flusher's tick backs off to kFlusherMaxPeriod while its ticks find nothing to
// flush; after kFlusherQuietTicks such ticks with nothing pending it sleeps until an
// append (looking again every kFlusherSleepCheck, a safety net).
constexpr std::chrono::milliseconds kFlusherMaxPeriod{5};
constexpr int kFlusherQuietTicks = 20;
constexpr std::chrono::milliseconds kFlusherSleepCheck{2000};
constexpr size_t kMaxReplyBytes = size_t{1} << 20;
using std::chrono::milliseconds;
// The receive of an answer a wait_while_progressing bounds.
constexpr milliseconds kNoDeadline = milliseconds::max();

// Runs `finished(within)` (true once what it waits for has come, false when
// `within` passed first) until it is true, for as long as the node keeps making
// progress: a slow node working through a long queue is waited for, a stalled or
// silent one is given up on at the session's timeout, saying which it is.
template <typename Finished>
void wait_while_progressing(const NodeLink& l, const char* op, const std::string& waiting_for, Finished&& finished) {
  const auto since = Clock::now();
  for (;;) {
    const auto left = std::chrono::ceil<milliseconds>(l.patience_left(since));
    if (left.count() <= 0) l.throw_no_progress(op, waiting_for, since);
    if (finished(left)) return;
  }
}

std::mutex g_session_mu;
std::shared_ptr<Session> g_session;

template <typename F>
flatbuffers::DetachedBuffer message_of(fb::Body type, F&& build_body) {
  flatbuffers::FlatBufferBuilder b(128);
  const auto body = build_body(b);
  b.Finish(fb::CreateMessage(b, protocol::kVersion, type, body.Union()));
  return b.Release();
}

}  // namespace

std::shared_ptr<Session> current_session(const char* op) {
  std::lock_guard lock(g_session_mu);
  if (!g_session) {
    THD_THROW(ValueError, op, "master-worker mode is not initialized on this process; call "
                              "thd::init_master_worker() first");
  }
  return g_session;
}

void set_current_session(std::shared_ptr<Session> session) {
  std::lock_guard lock(g_session_mu);
  g_session = std::move(session);
}

bool has_current_session() {
  std::lock_guard lock(g_session_mu);
  return g_session != nullptr;
}

std::shared_ptr<Session> take_current_session() {
  std::lock_guard lock(g_session_mu);
  return std::exchange(g_session, nullptr);
}

Handle::~Handle() {
  if (never_made.load()) return;
  if (auto s = session.lock()) {
    try {
      s->link(node, "free").queue_free(id);
    } catch (...) {  // a destructor must not throw; the session frees everything at its end
    }
  }
}

Session::Session(std::shared_ptr<DataChannel> channel, const MasterWorkerOptions& options,
                 std::function<void()> detach)
    : channel_(std::move(channel)), options_(options), detach_(std::move(detach)) {
  const int nodes = channel_->size() - 1;
  nodes_.resize(nodes);
  next_stream_.assign(static_cast<size_t>(nodes), 0);
  live_streams_.assign(static_cast<size_t>(nodes), 0);
  clock_offsets_.assign(static_cast<size_t>(nodes), 0);
  trace_path_ = trace::trace_path_from_env();
  if (trace_path_) {
    recorder_ = std::make_unique<trace::Recorder>();
    recorder_->name_process(0, "master", 0);
  }
  for (int n = 0; n < nodes; ++n) {
    links_.push_back(std::make_unique<NodeLink>(
        channel_, n, options_, [this] { return next_op_id(); }, [this] { wake_flusher(); },
        [this] { flush_entangled(); }));
  }
}

Session::~Session() {
  try {
    (void)close();
  } catch (...) {
  }
}

NodeLink& Session::link(int node, const char* op) {
  if (node < 0 || node >= num_nodes()) {
    THD_THROW_AT(IndexError, op, 0, -1, "node {} is out of range: this job has nodes 0..{} ({} workers)", node,
                 num_nodes() - 1, num_nodes());
  }
  return *links_[node];
}

int64_t Session::next_fetch_tag() { return protocol::kFetchTagBase + next_fetch_.fetch_add(1); }

int64_t Session::next_transfer_tag() { return protocol::kTransferTagBase + next_transfer_.fetch_add(1); }

std::shared_ptr<Handle> Session::new_handle(int node, Device device, Tensor meta) {
  auto h = std::allocate_shared<Handle>(PoolAllocator<Handle>{}, weak_from_this(), next_tensor_id(), node, device,
                                        std::move(meta));
  // A tensor a captured op creates is the graph's.
  if (Capture* capture = Capture::active(); capture != nullptr && &capture->session() == this) capture->own(h);
  return h;
}

std::shared_ptr<Handle> Session::new_handle(int node, Device device, const FreshMeta& fresh) {
  auto h = std::allocate_shared<Handle>(PoolAllocator<Handle>{}, weak_from_this(), next_tensor_id(), node, device,
                                        fresh);
  // A tensor a captured op creates is the graph's.
  if (Capture* capture = Capture::active(); capture != nullptr && &capture->session() == this) capture->own(h);
  return h;
}

void Session::start(uint64_t session_id, uint64_t seed) {
  replies_ = std::thread([this] {
    net::name_this_thread("thd-replies");
    reply_loop();
  });
  for (int n = 0; n < num_nodes(); ++n) {
    auto hello = message_of(fb::Body::Hello, [&](auto& b) {
      return fb::CreateHello(b, protocol::kVersion, session_id, n, num_nodes(), seed, tracing());
    });
    links_[n]->send_control({hello.data(), hello.size()});
  }
  std::unique_lock lock(mu_);
  const auto deadline = Clock::now() + options_.timeout;
  for (int n = 0; n < num_nodes(); ++n) {
    while (!nodes_[n].hello && nodes_[n].hello_error.empty() && !links_[n]->lost()) {
      if (Clock::now() >= deadline) {
        THD_THROW_AT(TimeoutError, "init_master_worker", 0, n + 1, "worker node {} did not answer the HELLO within {} ms",
                     n, options_.timeout.count());
      }
      wait_interruptibly(cv_, lock, deadline);
    }
    if (auto lost = links_[n]->lost()) std::rethrow_exception(lost);
    if (!nodes_[n].hello_error.empty()) {
      THD_THROW_AT(ValueError, "init_master_worker", 0, n + 1, "worker node {} refused the session: {}", n,
                   nodes_[n].hello_error);
    }
  }
  lock.unlock();
  if (tracing()) measure_clock_offsets();
  flusher_ = std::thread([this] {
    net::name_this_thread("thd-flusher");
    flusher_loop();
  });
}

void Session::flusher_loop() {
  // Its own mutex: a flush may block on credits, and the reply thread that returns
  // them must never wait for the flusher.
  std::unique_lock lock(flusher_mu_);
  // Every wake-up is a context switch that, on a small machine, takes the CPU of a
  // thread that is spinning for a reply or streaming a copy. So the flusher ticks
  // every flush_after only while its flushes are needed (the program left ops in a
  // buffer and went on without a sync point), backs off while the program flushes
  // its buffers itself, and sleeps when nothing is pending at all; only a sleeping
  // flusher is woken by an append.
  auto period = std::chrono::duration_cast<std::chrono::microseconds>(options_.flush_after);
  const auto max_period = std::max(period, std::chrono::duration_cast<std::chrono::microseconds>(kFlusherMaxPeriod));
  int quiet_ticks = 0;
  while (!stopping_) {
    if (quiet_ticks >= kFlusherQuietTicks) {
      flusher_asleep_.store(true);
      bool pending = false;
      for (auto& l : links_) pending = pending || l->has_pending();
      // The timeout is only a safety net: wake_flusher cannot miss this look.
      if (!pending && !stopping_) flusher_cv_.wait_for(lock, kFlusherSleepCheck);
      flusher_asleep_.store(false);
      quiet_ticks = 0;
      period = std::chrono::duration_cast<std::chrono::microseconds>(options_.flush_after);
      continue;
    }
    flusher_cv_.wait_for(lock, period);
    if (stopping_) break;
    const auto now = Clock::now();
    bool flushed = false;
    bool pending = false;
    for (auto& l : links_) {
      try {
        flushed = l->flush_if_idle(now, options_.flush_after) || flushed;
      } catch (const std::exception& e) {
        // A lost node: its next op raises WorkerLost at the caller.
        THD_LOG_DEBUG("master: background flush of a node failed: {}", e.what());
      }
      pending = pending || l->has_pending();
    }
    flush_entangled();
    if (flushed) {
      period = std::chrono::duration_cast<std::chrono::microseconds>(options_.flush_after);
    } else {
      period = std::min(2 * period, max_period);
    }
    quiet_ticks = pending || period < max_period ? 0 : quiet_ticks + 1;
  }
}

void Session::flush_entangled() {
  for (auto& l : links_) {
    if (!l->entangled()) continue;
    try {
      l->flush_alone();
    } catch (const std::exception& e) {
      // A lost node: its peers in the op notice it and fail; its next op raises
      // WorkerLost at the caller.
      THD_LOG_DEBUG("master: sending node {}'s part of an op across nodes failed: {}", l->node(), e.what());
    }
  }
}

void Session::wake_flusher() {
  if (!flusher_asleep_.load() || !flusher_asleep_.exchange(false)) return;
  // Taking its mutex orders this with the flusher's last look at the buffers: it
  // either saw this append, or is already waiting and gets the notification.
  std::lock_guard lock(flusher_mu_);
  flusher_cv_.notify_one();
}

void Session::reply_loop() {
  // One passive receiver on any source takes the replies of every node, so the
  // master's threads do not grow with the job. Passive: this thread only sleeps
  // until a reply is in; the threads that need an answer fast (a fetch, a sync)
  // wait on their own tags and drive the channel.
  protocol::MessageReceiver replies(channel_, kAnySource, protocol::kReplyTag, kMaxReplyBytes, /*passive=*/true);
  Message m;
  // Counts every reply handled, also one dropped as malformed: a SyncDone says how
  // many the worker sent before it.
  struct CountHandled {
    Session* s;
    int node;
    ~CountHandled() {
      std::lock_guard lock(s->mu_);
      ++s->nodes_[node].replies_handled;
      s->cv_.notify_all();
    }
  };
  while (!stopping_) {
    m = Message();  // no sender until a reply is in
    try {
      const bool got = replies.next(m, kReplyPoll);
      // A receive on any source waits on for the other senders when one is lost, so
      // lost nodes are looked for here, at least every kReplyPoll.
      notice_lost_nodes();
      if (!got) continue;
      const int node = node_of_rank(m.source());
      if (node < 0) {
        THD_LOG_WARN("master: dropped a reply from rank {}, which is not one of the job's workers", m.source());
        continue;
      }
      CountHandled counted{this, node};
      handle_reply(node, protocol::verify_message(m, "master"));
    } catch (const PeerLost& e) {
      // The channel failed the receive for a sender it lost (the receiver listens
      // on); the error names the peer.
      const int node = node_of_rank(e.context().peer >= 0 ? e.context().peer : m.source());
      if (node >= 0) {
        node_lost(node, e);
      } else {
        notice_lost_nodes();
      }
    } catch (const protocol::ProtocolError& e) {
      THD_LOG_WARN("master: dropped a malformed reply from rank {}: {}", m.source(), e.what());
    } catch (const std::exception& e) {
      if (stopping_) return;
      // Without its replies a node cannot be used (no credits, no syncs): fail it
      // loudly rather than let the next wait run into its timeout. An error not tied
      // to one node's reply stops the replies of all of them.
      const int node = node_of_rank(m.source());
      THD_LOG_WARN("master: reading replies{} failed: {}", node >= 0 ? fmt::format(" from node {}", node) : "",
                   e.what());
      if (node >= 0) {
        node_lost(node, e);
        continue;
      }
      for (int n = 0; n < num_nodes(); ++n) {
        if (!links_[n]->lost()) node_lost(n, e);
      }
      return;
    }
  }
}

int Session::node_of_rank(int rank) const { return rank >= 1 && rank <= num_nodes() ? rank - 1 : -1; }

void Session::notice_lost_nodes() {
  for (int n = 0; n < num_nodes(); ++n) {
    if (links_[n]->lost()) continue;
    const std::exception_ptr why = detail::peer_lost_error(*channel_, n + 1);
    if (!why) continue;
    try {
      std::rethrow_exception(why);
    } catch (const std::exception& e) {
      node_lost(n, e);
    }
  }
}

void Session::node_lost(int node, const std::exception& why) {
  auto lost = worker_lost(node, why);
  links_[node]->on_lost(lost);
  fail_fetches_of(node, lost);
  std::lock_guard lock(mu_);
  cv_.notify_all();
}

std::exception_ptr Session::remote_error(int node, uint64_t op_id, const std::string& op_name,
                                         const std::string& message, protocol::fb::ErrorKind kind, uint64_t graph,
                                         uint64_t replay) {
  if (graph != 0) {
    // "add: op 5 of graph 2 (replay 7) failed on node 0: ...".
    return make_remote_error(
        protocol::from_fb(kind),
        fmt::format("op {} of graph {} (replay {}) failed on node {}: {}", op_id, graph, replay, node, message),
        ErrorContext{.op = op_name, .rank = 0, .node = node, .peer = node + 1}, op_id);
  }
  // what(): "index_select: op 5 failed on node 0: index 7 is out of range ..." (the
  // worker leaves the name out of its text when it is this op's).
  return make_remote_error(protocol::from_fb(kind), fmt::format("op {} failed on node {}: {}", op_id, node, message),
                           ErrorContext{.op = op_name, .rank = 0, .node = node, .peer = node + 1}, op_id);
}

void Session::handle_reply(int node, const fb::Message& message) {
  switch (message.body_type()) {
    case fb::Body::Ack:
      links_[node]->on_ack(message.body_as_Ack()->batch_seq());
      return;
    case fb::Body::Progress: {
      const fb::Progress* p = message.body_as_Progress();
      links_[node]->on_progress(p->ops_finished(), p->ops_running());
      return;
    }
    case fb::Body::OpFailed: {
      const fb::OpFailed* f = message.body_as_OpFailed();
      std::lock_guard lock(mu_);
      const std::string name = f->op_name() ? f->op_name()->str() : "op";
      const std::string text = f->message() ? f->message()->str() : "";
      // Already raised by a fetch (whose reply may come first, from another node's
      // thread when the poison travelled with a copy): record it as raised.
      const bool raised = raised_.count({node, f->op_id(), f->replay()}) != 0;
      failures_.push_back({node, f->op_id(), name, text, f->kind(), raised, f->graph(), f->replay()});
      return;
    }
    case fb::Body::FetchFailed: {
      const fb::FetchFailed* f = message.body_as_FetchFailed();
      const std::string name = f->op_name() ? f->op_name()->str() : "op";
      const std::string text = f->message() ? f->message()->str() : "";
      Request receive;
      {
        std::lock_guard lock(mu_);
        auto it = fetches_.find(f->fetch_tag());
        if (it == fetches_.end() || it->second.first != node) return;
        receive = it->second.second;
        mark_raised_locked(f->node(), f->op_id(), f->replay());
      }
      receive.cancel(remote_error(f->node(), f->op_id(), name, text, f->kind(), f->graph(), f->replay()));
      return;
    }
    case fb::Body::HelloReply: {
      const fb::HelloReply* h = message.body_as_HelloReply();
      std::lock_guard lock(mu_);
      if (h->accepted()) nodes_[node].hello = true;
      else nodes_[node].hello_error = h->error() ? h->error()->str() : "refused";
      cv_.notify_all();
      return;
    }
    case fb::Body::NONE:
    case fb::Body::Hello:
    case fb::Body::Goodbye:
    case fb::Body::CommandBatch:
    case fb::Body::SyncDone:     // comes on the sync's own tag
    case fb::Body::EventStatus:  // on the query's own tag
    case fb::Body::EventNotice:  // worker to worker
    case fb::Body::NodeStats:    // on the query's own tag
    case fb::Body::ClockSample:  // on the query's own tag
      THD_LOG_WARN("master: node {} sent a {} message on the reply tag", node, fb::EnumNameBody(message.body_type()));
      return;
  }
}

void Session::fail_fetches_of(int node, std::exception_ptr why) {
  std::vector<Request> doomed;
  {
    std::lock_guard lock(mu_);
    for (auto& [tag, f] : fetches_) {
      if (f.first == node) doomed.push_back(f.second);
    }
  }
  for (auto& r : doomed) r.cancel(why);
}

Tensor Session::fetch(const Handle& h) {
  check_not_capturing("get");  // item() too
  const int64_t start = tracing() ? trace::now_ns() : 0;
  struct TraceGet {
    Session* s;
    int64_t start;
    const Handle& h;
    ~TraceGet() {
      if (s->tracing()) {
        s->trace_slice("get", start, {{"node", h.node}, {"tensor", h.id}, {"bytes", h.meta().nbytes()}});
      }
    }
  } trace_get{this, start, h};
  NodeLink& l = link(h.node, "get");
  l.throw_if_lost();
  Tensor out = Tensor::empty(h.meta().shape(), h.meta().dtype());
  const int64_t tag = next_fetch_tag();
  // No deadline of its own: the wait below gives up when the node stops making
  // progress, and cancels it.
  Request receive = channel_->irecv(out, l.rank(), {.tag = tag, .timeout = kNoDeadline});
  {
    std::lock_guard lock(mu_);
    fetches_.emplace(tag, std::make_pair(h.node, receive));
  }
  struct Unregister {
    Session* s;
    int64_t tag;
    ~Unregister() {
      std::lock_guard lock(s->mu_);
      s->fetches_.erase(tag);
    }
  } unregister{this, tag};
  try {
    l.append(fb::Op::Fetch, [&](auto& b) { return fb::CreateFetch(b, h.id, tag).Union(); });
    l.flush();
  } catch (...) {
    receive.cancel();
    throw;
  }
  try {
    wait_while_progressing(l, "get", fmt::format("for tensor {}", h.id), [&](milliseconds within) {
      return receive.wait_for(within) == WaitStatus::Ready;
    });
  } catch (const PeerLost& e) {
    l.on_lost(worker_lost(h.node, e));
    l.throw_if_lost();
  } catch (const Error&) {
    receive.cancel();
    throw;
  } catch (...) {
    // Interrupted: the node still sends the tensor (the receive keeps its memory).
    std::lock_guard lock(mu_);
    std::erase_if(abandoned_fetches_, [](const Request& r) { return r.test(); });
    abandoned_fetches_.push_back(std::move(receive));
    throw;
  }
  return out;
}

uint64_t Session::await_sync(int node, protocol::PostedMessage& answer, uint64_t sync_id, const char* op,
                             const std::string& waiting_for) {
  NodeLink& l = *links_[node];
  const fb::Message* m = nullptr;
  try {
    std::optional<std::span<const uint8_t>> bytes;
    wait_while_progressing(l, op, waiting_for, [&](milliseconds within) {
      bytes = answer.wait_for(within);
      return bytes.has_value();
    });
    m = &protocol::verify_message(*bytes, "master");
  } catch (const PeerLost& e) {
    l.on_lost(worker_lost(node, e));
    return 0;
  }
  const fb::SyncDone* done = m->body_as_SyncDone();
  if (done == nullptr || done->sync_id() != sync_id) {
    THD_THROW_AT(protocol::ProtocolError, op, 0, node + 1, "worker node {} answered {} {} with a {} message", node,
                 op, sync_id, done == nullptr ? fb::EnumNameBody(m->body_type()) : "SyncDone of another one");
  }
  std::lock_guard lock(mu_);
  nodes_[node].live_tensors = done->live_tensors();
  return done->replies_sent();
}

void Session::wait_for_replies(int node, uint64_t count, const char* op) {
  std::unique_lock lock(mu_);
  const auto deadline = Clock::now() + options_.timeout;
  while (nodes_[node].replies_handled < count && !links_[node]->lost()) {
    if (Clock::now() >= deadline) {
      THD_THROW_AT(TimeoutError, op, 0, node + 1,
                   "the replies of worker node {} were not handled within {} ms ({} of {})", node,
                   options_.timeout.count(), nodes_[node].replies_handled, count);
    }
    wait_interruptibly(cv_, lock, deadline);
  }
}

void Session::mark_raised_locked(int node, uint64_t op_id, uint64_t replay) {
  raised_.insert({node, op_id, replay});
  for (auto& r : failures_) {
    if (r.op_id == op_id && r.node == node && r.replay == replay) r.raised = true;
  }
}

std::exception_ptr Session::take_unraised_failure() {
  std::lock_guard lock(mu_);
  for (auto& r : failures_) {
    if (r.raised) continue;
    raised_.insert({r.node, r.op_id, r.replay});
    for (auto& same : failures_) {
      if (same.op_id == r.op_id && same.node == r.node && same.replay == r.replay) same.raised = true;
    }
    return remote_error(r.node, r.op_id, r.op_name, r.message, r.kind, r.graph, r.replay);
  }
  return nullptr;
}

void Session::synchronize() {
  check_not_capturing("synchronize");
  const int64_t start = tracing() ? trace::now_ns() : 0;
  struct TraceSync {
    Session* s;
    int64_t start;
    ~TraceSync() {
      if (s->tracing()) s->trace_slice("synchronize", start, {});
    }
  } trace_sync{this, start};
  // Each node answers on a tag of its own, received by this thread: no reply thread
  // in the way of the round trip. The receives are posted before the Syncs leave.
  struct Pending {
    int node;
    uint64_t id;
    std::unique_ptr<protocol::PostedMessage> answer;
  };
  std::vector<Pending> pending;
  for (int n = 0; n < num_nodes(); ++n) {
    if (links_[n]->lost()) continue;
    const uint64_t id = ++next_sync_;
    const int64_t tag = next_fetch_tag();
    auto answer = std::make_unique<protocol::PostedMessage>(*channel_, links_[n]->rank(), tag, kNoDeadline);
    try {
      links_[n]->append(fb::Op::Sync, [&](auto& b) { return fb::CreateSync(b, id, tag).Union(); });
      links_[n]->flush();
      pending.push_back({n, id, std::move(answer)});
    } catch (const WorkerLost&) {
    }
  }
  for (auto& p : pending) {
    const uint64_t replies = await_sync(p.node, *p.answer, p.id, "synchronize", "for its ops to finish");
    // Everything the worker reported before the sync (errors, acks) is handled
    // before the sync point decides what to raise.
    if (!links_[p.node]->lost()) wait_for_replies(p.node, replies);
  }
  for (auto& l : links_) l->throw_if_lost();
  if (auto e = take_unraised_failure()) std::rethrow_exception(e);
}

std::vector<Session::GraphRefusal> Session::define_graph(uint64_t graph, const std::vector<GraphPart>& parts) {
  constexpr const char* kOp = "GraphCapture::end";
  // Each node answers on a tag of its own once its command loop has read its part,
  // after the OpFailed of a refusal: every verdict is known before the graph can be
  // replayed, so no node runs a part its peers do not have.
  struct Pending {
    int node;
    uint64_t op_id;
    std::unique_ptr<protocol::PostedMessage> answer;
  };
  std::vector<Pending> pending;
  for (const GraphPart& part : parts) {
    NodeLink& l = link(part.node, kOp);
    const int64_t tag = next_fetch_tag();
    auto answer = std::make_unique<protocol::PostedMessage>(*channel_, l.rank(), tag, kNoDeadline);
    const uint64_t op_id = l.append_on(0, fb::Op::DefineGraph, [&](NodeLink::Builder& b) {
      return fb::CreateDefineGraph(b, graph, b.CreateVector(*part.commands), b.CreateVector(*part.owned), tag).Union();
    });
    pending.push_back({part.node, op_id, std::move(answer)});
  }
  for (const Pending& p : pending) links_[p.node]->flush();
  std::vector<GraphRefusal> refusals;
  for (const Pending& p : pending) {
    const uint64_t replies =
        await_sync(p.node, *p.answer, graph, kOp, fmt::format("for its verdict on graph {}", graph));
    NodeLink& l = *links_[p.node];
    l.throw_if_lost();
    wait_for_replies(p.node, replies, kOp);
    l.throw_if_lost();
    std::lock_guard lock(mu_);
    for (auto& r : failures_) {
      if (r.node != p.node || r.op_id != p.op_id || r.replay != 0) continue;
      // Raised here, by the caller: not again at the next sync point.
      r.raised = true;
      raised_.insert({r.node, r.op_id, r.replay});
      refusals.push_back({p.node, r.op_id, r.message, r.kind});
      break;
    }
  }
  return refusals;
}

std::vector<uint64_t> Session::live_tensors() {
  synchronize();
  std::lock_guard lock(mu_);
  std::vector<uint64_t> out;
  for (const auto& n : nodes_) out.push_back(n.live_tensors);
  return out;
}

std::exception_ptr Session::close() {
  {
    std::lock_guard lock(mu_);
    if (closed_) return nullptr;
    closed_ = true;
  }
  std::exception_ptr first;
  try {
    synchronize();
  } catch (const WorkerLost&) {
    // Reported where the program used the node; the other nodes still end cleanly.
  } catch (...) {
    first = std::current_exception();
  }
  if (tracing()) write_trace();
  auto goodbye = message_of(fb::Body::Goodbye, [](auto& b) { return fb::CreateGoodbye(b); });
  for (auto& l : links_) {
    try {
      if (!l->lost()) l->send_control({goodbye.data(), goodbye.size()});
    } catch (const std::exception& e) {
      THD_LOG_DEBUG("master: goodbye to a node failed: {}", e.what());
    }
  }
  {
    std::lock_guard lock(flusher_mu_);
    stopping_ = true;
  }
  flusher_cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  if (replies_.joinable()) replies_.join();
  if (detach_) {
    try {
      detach_();
    } catch (const std::exception& e) {
      THD_LOG_WARN("master: detaching from the pool failed: {}", e.what());
    }
  }
  channel_->shutdown();
  return first;
}

}  // namespace thd::master
