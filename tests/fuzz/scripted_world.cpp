#include "scripted_world.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <thd/store.h>

#include "datachannel/group_state.h"
#include "fuzz_target.h"
#include "protocol/codec.h"
#include "protocol/framing.h"
#include "tensor/check.h"

namespace thd::fuzz {

namespace {

std::exception_ptr lost_master() {
  ErrorContext context;
  context.op = "recv";
  context.rank = ScriptedTransport::kWorker;
  context.peer = ScriptedTransport::kMaster;
  return std::make_exception_ptr(PeerLost("the master's script has ended (it is gone)", context));
}

std::exception_ptr nothing_left(int src, int64_t tag) {
  ErrorContext context;
  context.op = "recv";
  context.rank = ScriptedTransport::kWorker;
  context.peer = src;
  return std::make_exception_ptr(
      TimeoutError(fmt::format("rank {} sent nothing (more) on tag {} in this script", src, tag), context));
}

}  // namespace

ScriptedTransport::Frame ScriptedTransport::raw_frame(std::vector<uint8_t> bytes) {
  Frame f;
  f.kind = {detail::MessageOp::P2P, detail::kRawBytes, 0, -1, bytes.size()};
  f.bytes = std::move(bytes);
  return f;
}

ScriptedTransport::Frame ScriptedTransport::typed_frame(uint8_t dtype, std::vector<uint8_t> bytes) {
  if (dtype == kRawDType) return raw_frame(std::move(bytes));
  Frame f;
  // As a tensor send announces itself: its dtype and element count. A code that is
  // no dtype announces 1-byte elements (no thd rank sends one; the receive refuses it).
  const size_t element = dtype < kNumDTypes ? element_size(static_cast<DType>(dtype)) : 1;
  f.kind = {detail::MessageOp::P2P, dtype, 0, -1, bytes.size() / element};
  f.bytes = std::move(bytes);
  return f;
}

ScriptedTransport::ScriptedTransport(const std::vector<Record>& script)
    : Transport(kWorker, kWorldSize), verbose_(std::getenv("THD_FUZZ_VERBOSE") != nullptr) {
  for (const Record& r : script) {
    switch (r.kind) {
      case RecordKind::Message:
        commands_.push_back(raw_frame(r.bytes));
        break;
      case RecordKind::CommandFrame:
        commands_.push_back(typed_frame(r.dtype, r.bytes));
        break;
      case RecordKind::Upload:
        uploads_.push_back(typed_frame(r.dtype, r.bytes));
        break;
      case RecordKind::PeerMessage:
        peer_.push_back(raw_frame(r.bytes));
        break;
      case RecordKind::PeerFrame:
        peer_.push_back(typed_frame(r.dtype, r.bytes));
        break;
    }
  }
}

void ScriptedTransport::post_send(std::span<const uint8_t> data, int dst, const detail::Envelope& envelope,
                                  const std::shared_ptr<detail::RequestState>& request) {
  THD_FUZZ_CHECK(dst >= 0 && dst < kWorldSize, "the worker sent to a rank outside its world");
  if (dst == kMaster && envelope.tag == protocol::kReplyTag && envelope.context == detail::p2p_context(0)) {
    std::lock_guard lock(mu_);
    verify_reply(data);
  }
  request->complete(kWorker, data.size());
}

void ScriptedTransport::verify_reply(std::span<const uint8_t> message) {
  const protocol::fb::Message* m = nullptr;
  try {
    m = &protocol::verify_message(message, "fuzz: reply");
  } catch (const protocol::ProtocolError& e) {
    invariant_failed("the worker sent the master a reply that does not verify", e.what(), __FILE__, __LINE__);
  }
  ++replies_;
  if (verbose_) {  // triage: what the worker answered
    const auto* failed = m->body_as_OpFailed();
    std::fprintf(stderr, "reply %zu: %s%s%s\n", replies_, protocol::fb::EnumNameBody(m->body_type()),
                 failed != nullptr ? ": " : "", failed != nullptr ? failed->message()->c_str() : "");
  }
}

void ScriptedTransport::post_recv(std::span<uint8_t> data, int src, const detail::Envelope& envelope,
                                  const std::shared_ptr<detail::RequestState>& request) {
  std::unique_lock lock(mu_);
  std::deque<Frame>* queue = nullptr;
  if (src == kMaster && envelope.tag == protocol::kCommandTag) {
    if (commands_.empty()) {
      lock.unlock();
      request->fail(lost_master());
      return;
    }
    queue = &commands_;
  } else if (src == kMaster && envelope.tag == protocol::kUploadTag) {
    queue = &uploads_;
  } else if (src == kMaster) {
    // The master sends nothing else: a receive that only a lost master would end
    // (the session's watch on it) stays pending until it is cancelled.
    parked_.push_back(request);
    return;
  } else if (src == kPeer) {
    queue = &peer_;
  }
  if (queue == nullptr || queue->empty()) {
    lock.unlock();
    request->fail(nothing_left(src, envelope.tag));
    return;
  }
  Frame frame = std::move(queue->front());
  queue->pop_front();
  lock.unlock();
  detail::Envelope sent = envelope;
  sent.kind = frame.kind;
  detail::PostedRecv recv{request, data, src, envelope};
  if (auto mismatch = detail::accept_match(kWorker, src, recv, sent, frame.bytes.size())) {
    request->fail(mismatch);
    return;
  }
  if (!frame.bytes.empty()) std::memcpy(recv.data.data(), frame.bytes.data(), frame.bytes.size());
  request->complete(src, frame.bytes.size());
}

void ScriptedTransport::cancel(const std::shared_ptr<detail::RequestState>& request, std::exception_ptr why) {
  {
    std::lock_guard lock(mu_);
    std::erase(parked_, request);
  }
  request->fail(std::move(why));  // a no-op for the others: they finished when posted
}

ScriptedTransport::~ScriptedTransport() {
  for (const auto& request : parked_) request->fail(lost_master());
}

std::exception_ptr ScriptedTransport::peer_error(int) const { return nullptr; }

size_t ScriptedTransport::replies() const {
  std::lock_guard lock(mu_);
  return replies_;
}

std::shared_ptr<DataChannel> scripted_channel(std::shared_ptr<ScriptedTransport> transport,
                                              std::chrono::milliseconds timeout) {
  auto g = std::make_unique<detail::GroupState>();
  g->backend = "scripted";
  g->transport = std::move(transport);
  g->store = std::make_shared<HashStore>(timeout);
  auto ranks = std::make_shared<std::vector<int>>();
  for (int r = 0; r < ScriptedTransport::kWorldSize; ++r) ranks->push_back(r);
  g->world_ranks = std::move(ranks);
  g->rank = ScriptedTransport::kWorker;
  g->id = 0;
  g->timeout = timeout;
  return std::make_shared<DataChannel>(std::move(g));
}

}  // namespace thd::fuzz
