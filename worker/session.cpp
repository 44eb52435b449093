#include "worker/session.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <thd/config.h>
#include <thd/memory.h>

#include "protocol/framing.h"
#include "tensor/check.h"
#include "tensor/env_setting.h"
#include "worker/devices.h"
#include "worker/ops.h"

namespace thd::worker {

namespace {

size_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return SIZE_MAX;  // unknown: no limit beyond the allocator's own
  return static_cast<size_t>(pages) * static_cast<size_t>(page);
}

// A test hook's latch key from the environment; 0 (no hook) when unset, empty or 0,
// and ValueError naming the variable when it is not a whole number.
uint64_t env_latch(const char* name) {
  return detail::read_whole_number({.name = name}, "worker").value_or(0);
}

}  // namespace

Session::Session(std::shared_ptr<DataChannel> channel, const SessionLimits& limits)
    : channel_(std::move(channel)),
      node_(channel_->rank() - 1),
      memory_limit_(limits.memory_bytes != 0 ? limits.memory_bytes : physical_memory()),
      device_memory_limit_(limits.device_memory_bytes),
      check_(StreamCheck::from_env(node_)),
      test_hooks_(THD_ENABLE_TEST_HOOKS && std::getenv("THD_TEST_HOOKS") != nullptr &&
                  std::string(std::getenv("THD_TEST_HOOKS")) == "1"),
      notice_hold_latch_(test_hooks_ ? env_latch("THD_TEST_HOLD_EVENT_NOTICES") : 0),
      refuses_graphs_(test_hooks_ && std::getenv("THD_TEST_REFUSE_GRAPHS") != nullptr &&
                      std::string(std::getenv("THD_TEST_REFUSE_GRAPHS")) == std::to_string(node_)),
      streams_(*this) {
  // thd::stats() reports the peak of this session (a pool process serves many).
  reset_peak_memory_stats();
  master_watch_ = channel_->irecv_bytes(std::span(&master_watch_byte_, 1), 0,
                                        {.tag = protocol::kReplyTag, .timeout = std::chrono::milliseconds::max(),
                                         .passive_wait = true});
}

Session::~Session() {
  progress_.reset();
  try {
    master_watch_.cancel();
  } catch (const std::exception&) {  // a channel already shut down failed it already
  }
  stopping_.store(true);
  turn_cv_.notify_all();
  latch_cv_.notify_all();
  streams_.stop_all();
  // GPU work still queued would outlive the tensors it uses, and its records'
  // completions the session they report to.
  streams_.for_each_context([](ExecContext& c) {
    try {
      c.gpu().synchronize();
    } catch (const std::exception&) {  // a failed GPU: nothing of it is used again
    }
  });
}

bool Session::drain_streams() {
  uint64_t finished = ops_finished();
  for (;;) {
    if (streams_.drain(std::chrono::steady_clock::now() + timeout())) return true;
    const uint64_t now = ops_finished();
    if (now == finished || stopping() || master_lost()) return false;
    finished = now;
  }
}

void Session::start_progress_reports() {
  if (progress_) return;
  progress_ = std::make_unique<ProgressReporter>(
      ProgressReporter::interval_for(timeout()),
      [this] {
        const uint64_t finished = ops_finished();
        const uint64_t executed = ops_executed();
        return ProgressReporter::Sample{.finished = finished,
                                        .running = static_cast<uint32_t>(executed > finished ? executed - finished : 0),
                                        .queued = !streams_.idle()};
      },
      [this](const ProgressReporter::Sample& s) {
        flatbuffers::FlatBufferBuilder b(64);
        auto body = fb::CreateProgress(b, s.finished, s.running);
        b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::Progress, body.Union()));
        reply({b.GetBufferPointer(), b.GetSize()});
      });
}

size_t Session::memory_limit(Device device) {
  if (device.is_cpu()) return memory_limit_;
  use_device(device, "memory limit");
  if (device_memory_limit_ != 0) return device_memory_limit_;
  const size_t total = device_total_memory(device.index());
  return total != 0 ? total : memory_limit_;
}

void Session::reserve(uint64_t bytes, const std::string& op, Device device) {
  if (device.is_cpu()) {
    const auto in_use = static_cast<uint64_t>(std::max<int64_t>(memory_stats().allocated_bytes, 0));
    if (bytes > memory_limit_ || in_use > memory_limit_ - bytes) {
      THD_THROW(HostOutOfMemoryError, op,
                "node {}: {} more bytes of tensors would take this node past its limit of {} bytes ({} bytes in use)",
                node_, bytes, memory_limit_, in_use);
    }
    return;
  }
  use_device(device, op);
  const size_t limit = memory_limit(device);
  const auto in_use = static_cast<uint64_t>(std::max<int64_t>(memory_stats(device).allocated_bytes, 0));
  if (bytes > limit || in_use > limit - bytes) {
    THD_THROW(OutOfMemoryError, op, "node {}: {} more bytes of tensors on {} would take it past its limit of {} bytes "
              "({} bytes in use)", node_, bytes, device.str(), limit, in_use);
  }
}

void Session::check_extent(uint64_t bytes, const std::string& op, Device device) {
  const size_t limit = memory_limit(device);
  if (bytes > limit) {
    THD_THROW(ValueError, op, "node {}: a view of {} bytes on {} is larger than this node's limit of {} bytes", node_,
              bytes, device.str(), limit);
  }
}

void Session::use_device(Device device, const std::string& op) {
  check_device(node_, device, op);
  if (device.is_cpu()) return;
  const auto index = static_cast<size_t>(device.index());
  std::lock_guard lock(devices_mu_);
  if (index < devices_used_.size() && devices_used_[index]) return;
  if (devices_used_.size() <= index) devices_used_.resize(index + 1, false);
  devices_used_[index] = true;
  reset_peak_memory_stats(device);
}

std::vector<int> Session::used_devices() {
  std::lock_guard lock(devices_mu_);
  std::vector<int> out;
  for (size_t i = 0; i < devices_used_.size(); ++i) {
    if (devices_used_[i]) out.push_back(static_cast<int>(i));
  }
  return out;
}

void Session::post_upload(uint64_t id, Tensor tensor, Request receive) {
  std::lock_guard lock(uploads_mu_);
  uploads_[id] = {std::move(tensor), std::move(receive)};
}

std::optional<std::pair<Tensor, Request>> Session::take_upload(uint64_t id) {
  std::lock_guard lock(uploads_mu_);
  auto it = uploads_.find(id);
  if (it == uploads_.end()) return std::nullopt;
  auto out = std::move(it->second);
  uploads_.erase(it);
  return out;
}

void Session::reply(std::span<const uint8_t> message) {
  std::lock_guard lock(reply_mu_);
  protocol::send_message(*channel_, 0, protocol::kReplyTag, message, timeout());
  replies_sent_.fetch_add(1);
}

void Session::await_turn(uint64_t turn, const char* op) {
  std::unique_lock lock(turn_mu_);
  const auto deadline = std::chrono::steady_clock::now() + timeout();
  if (!turn_cv_.wait_until(lock, deadline, [&] { return serving_turn_ >= turn || stopping_.load(); })) {
    THD_THROW(TimeoutError, op, "node {}: an earlier collective did not start within {} ms (collectives of one node run "
              "in the order they were issued, whatever their streams)", node_, timeout().count());
  }
  if (serving_turn_ < turn) THD_THROW(Error, op, "node {}: the session is ending", node_);
}

void Session::end_turn(uint64_t turn) {
  {
    std::lock_guard lock(turn_mu_);
    if (serving_turn_ <= turn) serving_turn_ = turn + 1;
  }
  turn_cv_.notify_all();
}

DataChannel& Session::group(const std::vector<int>& nodes) {
  auto it = groups_.find(nodes);
  if (it != groups_.end()) return *it->second;
  std::vector<int> ranks;
  ranks.reserve(nodes.size());
  for (int n : nodes) ranks.push_back(n + 1);
  auto g = channel_->new_group(std::move(ranks));
  return *groups_.emplace(nodes, std::move(g)).first->second;
}

void Session::enable_trace() {
  if (recorder_) return;
  recorder_ = std::make_unique<trace::Recorder>();
  recorder_->name_process(trace_pid(), fmt::format("node {}", node_), trace_pid());
  recorder_->name_track(trace_pid(), 0, "default stream", 0);
}

void Session::open_latch(uint64_t key) {
  {
    std::lock_guard lock(latch_mu_);
    open_latches_.insert(key);
  }
  latch_cv_.notify_all();
}

bool Session::wait_latch(uint64_t key, std::chrono::milliseconds timeout) {
  std::unique_lock lock(latch_mu_);
  return latch_cv_.wait_for(lock, timeout, [&] { return open_latches_.count(key) != 0 || stopping_.load(); }) &&
         open_latches_.count(key) != 0;
}

void Session::open_notice_board(uint64_t session_id) {
  std::lock_guard lock(notices_mu_);
  if (!peer_boards_.empty()) return;  // a second Hello: the first one's boards stand
  session_id_ = session_id;
  notice_board_ = NoticeBoard::create(session_id, node_);
  peer_boards_.resize(static_cast<size_t>(channel_->size() - 1));
}

NoticeBoard* Session::peer_notice_board(int node) {
  std::lock_guard lock(notices_mu_);
  if (!notice_board_ || node < 0 || node >= static_cast<int>(peer_boards_.size()) || node == node_) return nullptr;
  auto& board = peer_boards_[static_cast<size_t>(node)];
  if (!board) board = NoticeBoard::open(session_id_, node);
  return board->get();
}

void Session::keep_late_notice(std::unique_ptr<protocol::PostedMessage> notice) {
  std::lock_guard lock(notices_mu_);
  // The ones whose message has come since are done with.
  std::erase_if(late_notices_, [](const std::unique_ptr<protocol::PostedMessage>& n) { return n->test(); });
  late_notices_.push_back(std::move(notice));
}

void Session::seed_all(uint64_t seed) {
  seed_.store(seed);
  streams_.for_each_context([&](ExecContext& ctx) { seed_stream(ctx); });
}

void Session::seed_stream(ExecContext& ctx) {
  // The default stream draws what it always did; every other stream a sequence of
  // its own, so each stream is reproducible whatever the others do.
  const uint64_t seed = seed_.load() + 0x632be59bd9b4e019ull * ctx.stream();
  ctx.generator().manual_seed(node_seed(seed, node_));
}

}  // namespace thd::worker
