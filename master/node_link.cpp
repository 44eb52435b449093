#include "master/node_link.h"

#include <algorithm>

#include "master/graph.h"
#include "master/interruptible_wait.h"
#include "master/stream_handle.h"

#include "datachannel/check.h"
#include "protocol/framing.h"

namespace thd::master {

namespace {

constexpr size_t kInitialBuilderBytes = 64 << 10;

}  // namespace

std::exception_ptr worker_lost(int node, const std::exception& why) {
  try {
    throw WorkerLost(fmt::format("worker node {} (rank {}) was lost: {}", node, node + 1, why.what()),
                     ErrorContext{.op = "worker", .rank = 0, .node = node, .peer = node + 1});
  } catch (...) {
    return std::current_exception();
  }
}

NodeLink::NodeLink(std::shared_ptr<DataChannel> channel, int node, const MasterWorkerOptions& options,
                   std::function<uint64_t()> next_op_id, std::function<void()> on_pending,
                   std::function<void()> after_flush)
    : channel_(std::move(channel)),
      node_(node),
      options_(options),
      next_op_id_(std::move(next_op_id)),
      on_pending_(std::move(on_pending)),
      after_flush_(std::move(after_flush)),
      builder_(kInitialBuilderBytes) {}

uint64_t NodeLink::append(fb::Op type, const BuildOp& build) { return append_on(scoped_stream(node_), type, build); }

uint64_t NodeLink::append_on(uint32_t stream, fb::Op type, const BuildOp& build, bool entangled) {
  if (Capture* capture = Capture::active(); capture != nullptr && Capture::takes(type)) {
    return capture->record(*this, stream, type, build);
  }
  return append_with(
      [&](uint64_t id) { return fb::CreateCommand(builder_, id, type, build(builder_), stream); }, entangled);
}

uint64_t NodeLink::append_elementwise(const protocol::ElementwiseCommand& command) {
  const uint32_t stream = scoped_stream(node_);
  if (Capture* capture = Capture::active(); capture != nullptr && Capture::takes(command.type)) {
    return capture->record(*this, stream, command.type, [&](Builder& b) { return command.build(b); });
  }
  return append_with([&](uint64_t id) { return writer_.write(builder_, id, stream, command); }, false);
}

template <typename Write>
uint64_t NodeLink::append_with(Write&& write, bool entangled) {
  throw_if_lost();
  uint64_t id;
  bool first;
  bool sent = false;
  {
    std::lock_guard lock(mu_);
    id = next_op_id_();
    first = commands_.empty();
    if (first) first_append_ = Clock::now();
    commands_.push_back(write(id));
    appended_.fetch_add(1);
    if (entangled) entangled_.store(true);
    pending_.store(true);  // seq_cst: paired with the flusher's asleep flag
    if (static_cast<int64_t>(builder_.GetSize()) >= options_.batch_bytes ||
        commands_.size() >= static_cast<size_t>(options_.max_ops_in_flight / 4 + 1)) {
      flush_locked();
      sent = true;
    }
  }
  // Outside the buffer's lock: the flusher looks at buffers while holding its own.
  if (first) on_pending_();
  if (sent) after_flush_();
  return id;
}

uint64_t NodeLink::append_upload(const BuildOp& build, const Tensor& contiguous) {
  check_not_capturing("dist_send", "it sends tensor bytes from the master, which a graph cannot hold (upload before "
                                   "the capture, and copy_ into the graph's input between replays)");
  throw_if_lost();
  uint64_t id;
  {
    std::lock_guard lock(mu_);
    id = next_op_id_();
    const auto table = build(builder_);
    if (commands_.empty()) first_append_ = Clock::now();
    commands_.push_back(fb::CreateCommand(builder_, id, fb::Op::Upload, table, scoped_stream(node_)));
    appended_.fetch_add(1);
    uploads_.push_back(contiguous);
    upload_bytes_ += static_cast<int64_t>(contiguous.nbytes());
    // Large payloads go at once: the caller's dist_send returns only when its bytes
    // have left (a blocking send), so the tensor may be reused afterwards.
    flush_locked();
  }
  after_flush_();
  return id;
}

void NodeLink::queue_free(uint64_t id) {
  bool first;
  {
    std::lock_guard lock(free_mu_);
    first = frees_.empty();
    if (first) first_free_ = Clock::now();
    frees_.push_back({id, appended_.load()});
    pending_.store(true);  // seq_cst: paired with the flusher's asleep flag
  }
  if (first) on_pending_();
}

void NodeLink::send_control(std::span<const uint8_t> message) {
  throw_if_lost();
  {
    std::lock_guard lock(mu_);
    flush_locked();
    try {
      protocol::send_message(*channel_, rank(), protocol::kCommandTag, message, options_.timeout);
    } catch (const PeerLost& e) {
      on_lost(worker_lost(node_, e));
      throw_if_lost();
    }
  }
  after_flush_();
}

void NodeLink::flush() {
  flush_alone();
  after_flush_();
}

void NodeLink::flush_alone() {
  std::lock_guard lock(mu_);
  flush_locked();
}

bool NodeLink::has_pending() const { return pending_.load(); }

bool NodeLink::flush_if_idle(Clock::time_point now, std::chrono::microseconds idle) {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;  // someone is appending or sending: not idle
  if (lost()) return false;
  if (!commands_.empty()) {
    if (now - first_append_ < idle) return false;
    flush_locked();
    return true;
  }
  // Frees alone are in no hurry: they ride along with the next batch, and go on
  // their own only after a longer while (a program that stopped issuing ops).
  {
    std::lock_guard free_lock(free_mu_);
    if (frees_.empty() || now - first_free_ < idle * kFreeIdleFactor) return false;
  }
  flush_locked();
  return false;  // no op was waiting: nothing says the program relies on idle flushes
}

void NodeLink::flush_locked() {
  std::vector<QueuedFree> frees;
  {
    std::lock_guard lock(free_mu_);
    frees.swap(frees_);
  }
  if (commands_.empty() && frees.empty()) {
    entangled_.store(false);
    return;
  }
  const auto ops = static_cast<int64_t>(commands_.size());
  // Whatever happens below, this buffer is consumed: a lost node fails it.
  auto reset = [&] {
    builder_.Clear();
    writer_.reset();
    commands_.clear();
    {
      // Frees queued while this batch was sent stay pending; the vector's capacity
      // goes back for the next batch.
      std::lock_guard lock(free_mu_);
      if (frees_.empty()) {
        frees.clear();
        frees_.swap(frees);
      }
      pending_.store(!frees_.empty());
    }
    uploads_.clear();
    upload_bytes_ = 0;
    entangled_.store(false);
  };
  try {
    const FreeSchedule schedule = free_schedule(frees);
    const auto bytes = static_cast<int64_t>(builder_.GetSize()) + upload_bytes_;
    acquire_credits(ops, bytes);
    bool want_ack;
    {
      std::lock_guard lock(credit_mu_);
      want_ack = ops_in_flight_ > options_.max_ops_in_flight / 2 ||
                 bytes_in_flight_ > options_.max_bytes_in_flight / 2;
    }
    const uint64_t seq = ++seq_;
    const auto batch = fb::CreateCommandBatch(builder_, seq, want_ack, builder_.CreateVector(commands_),
                                              schedule.ids, schedule.before, schedule.op);
    builder_.Finish(fb::CreateMessage(builder_, protocol::kVersion, fb::Body::CommandBatch, batch.Union()));
    {
      std::lock_guard lock(credit_mu_);
      in_flight_.push_back({seq, ops, bytes, want_ack});
    }
    protocol::send_message(*channel_, rank(), protocol::kCommandTag,
                           {builder_.GetBufferPointer(), builder_.GetSize()}, options_.timeout);
    for (const Tensor& t : uploads_) {
      channel_->send(t, rank(), {.tag = protocol::kUploadTag, .timeout = options_.timeout});
    }
  } catch (const PeerLost& e) {
    reset();
    on_lost(worker_lost(node_, e));
    throw_if_lost();
  } catch (...) {
    reset();
    throw;
  }
  reset();
}

NodeLink::FreeSchedule NodeLink::free_schedule(const std::vector<QueuedFree>& frees) {
  if (frees.empty()) return {};
  // commands_ holds the appends numbered [first, appended_); a free queued at
  // position p goes before command p (frees from before this batch, first).
  const uint64_t total = appended_.load();
  const uint64_t first = total - commands_.size();
  FreeSchedule schedule;
  // Each vector is written in place before the next one is made (which may move
  // the builder's buffer).
  uint32_t* before = nullptr;
  schedule.before = builder_.CreateUninitializedVector(frees.size(), &before);
  for (size_t i = 0; i < frees.size(); ++i) {
    before[i] = static_cast<uint32_t>(std::clamp(frees[i].position, first, total) - first);
  }
  uint64_t* ids = nullptr;
  schedule.ids = builder_.CreateUninitializedVector(frees.size(), &ids);
  for (size_t i = 0; i < frees.size(); ++i) ids[i] = frees[i].id;
  schedule.op = next_op_id_();
  return schedule;
}

void NodeLink::acquire_credits(int64_t ops, int64_t bytes) {
  std::unique_lock lock(credit_mu_);
  const auto start = Clock::now();
  // A batch larger than the whole budget still goes once nothing else is in flight.
  while (!lost_ && ops_in_flight_ > 0 &&
         (ops_in_flight_ + ops > options_.max_ops_in_flight || bytes_in_flight_ + bytes > options_.max_bytes_in_flight)) {
    if (!in_flight_.back().ack_requested) {
      // Small batches ask for no ack, so their credits come back only with a later
      // batch's ack or a sync: a batch that must wait for them (one larger than the
      // budget left) would wait forever. An empty batch asks for the ack (acks are
      // cumulative: it covers every batch before it).
      const uint64_t seq = ++seq_;
      in_flight_.push_back({seq, 0, 0, true});
      lock.unlock();
      request_ack(seq);
      lock.lock();
      continue;
    }
    // The timeout runs from the node's last progress: a slow node that keeps
    // finishing ops is waited for, however long its queue.
    const auto since = std::max(start, last_progress_);
    if (Clock::now() - since >= options_.timeout) {
      throw_no_progress_locked(
          "flow control",
          fmt::format("for credits ({} ops / {} bytes in flight)", ops_in_flight_, bytes_in_flight_), since);
    }
    wait_interruptibly(credit_cv_, lock, since + options_.timeout);
  }
  if (lost_) std::rethrow_exception(lost_);
  ops_in_flight_ += ops;
  bytes_in_flight_ += bytes;
}

NodeLink::Clock::duration NodeLink::patience_left(Clock::time_point since) const {
  std::lock_guard lock(credit_mu_);
  return std::max(since, last_progress_) + options_.timeout - Clock::now();
}

void NodeLink::throw_no_progress(const char* op, const std::string& waiting_for, Clock::time_point since) const {
  std::lock_guard lock(credit_mu_);
  throw_no_progress_locked(op, waiting_for, since);
}

void NodeLink::throw_no_progress_locked(const char* op, const std::string& waiting_for,
                                        Clock::time_point since) const {
  const auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_heard_).count();
  if (last_heard_ > since) {
    THD_THROW_AT(TimeoutError, op, 0, rank(),
                 "worker node {} is alive (its last progress report came {} ms ago) but finished no op in {} ms while "
                 "the master waited {}; {} op(s) run there now: one does not finish (a wait nothing satisfies: an "
                 "event, a receive or a collective whose peer never comes?)",
                 node_, ago, options_.timeout.count(), waiting_for, ops_running_);
  }
  THD_THROW_AT(TimeoutError, op, 0, rank(),
               "worker node {} sent nothing in {} ms (no reply, no progress report) while the master waited {}: is it "
               "stopped (SIGSTOP, a debugger) or cut off?",
               node_, options_.timeout.count(), waiting_for);
}

void NodeLink::request_ack(uint64_t seq) {
  flatbuffers::FlatBufferBuilder b(64);
  const auto batch = fb::CreateCommandBatch(b, seq, /*want_ack=*/true, b.CreateVector(std::vector<flatbuffers::Offset<fb::Command>>{}));
  b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::CommandBatch, batch.Union()));
  protocol::send_message(*channel_, rank(), protocol::kCommandTag, {b.GetBufferPointer(), b.GetSize()},
                         options_.timeout);
}

void NodeLink::on_progress(uint64_t finished, uint32_t running) {
  std::lock_guard lock(credit_mu_);
  const auto now = Clock::now();
  last_heard_ = now;
  ops_running_ = running;
  if (finished > ops_finished_) {
    ops_finished_ = finished;
    last_progress_ = now;
    credit_cv_.notify_all();  // a waiter's deadline moved
  }
}

void NodeLink::on_ack(uint64_t batch_seq) {
  std::lock_guard lock(credit_mu_);
  last_heard_ = last_progress_ = Clock::now();
  while (!in_flight_.empty() && in_flight_.front().seq <= batch_seq) {
    ops_in_flight_ -= in_flight_.front().ops;
    bytes_in_flight_ -= in_flight_.front().bytes;
    in_flight_.pop_front();
  }
  credit_cv_.notify_all();
}

void NodeLink::on_lost(std::exception_ptr error) {
  std::lock_guard lock(credit_mu_);
  if (!lost_) lost_ = std::move(error);
  is_lost_.store(true, std::memory_order_release);
  credit_cv_.notify_all();
}

std::exception_ptr NodeLink::lost() const {
  std::lock_guard lock(credit_mu_);
  return lost_;
}

void NodeLink::throw_if_lost() const {
  if (!is_lost_.load(std::memory_order_acquire)) return;
  if (auto e = lost()) std::rethrow_exception(e);
}

}  // namespace thd::master
