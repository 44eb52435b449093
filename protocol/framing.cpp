#include "protocol/framing.h"

#include <cstring>

#include "protocol/codec.h"
#include "tensor/check.h"

namespace thd::protocol {

namespace {

constexpr uint32_t kMagic = 0x46444854;  // "THDF"

// A posted receive lives until the channel's own deadline; the runtime's pollers
// cancel it at shutdown, so "forever" here only has to outlast a session.
constexpr std::chrono::milliseconds kPostedReceiveLifetime = std::chrono::hours(24 * 365);

}  // namespace

void send_message(DataChannel& channel, int dst, int64_t tag, std::span<const uint8_t> message,
                  std::chrono::milliseconds timeout) {
  uint8_t head[kHeadFrameBytes];
  const auto length = static_cast<uint32_t>(message.size());
  std::memcpy(head, &kMagic, 4);
  std::memcpy(head + 4, &length, 4);
  const bool inline_body = message.size() <= kInlineBytes;
  if (inline_body && !message.empty()) std::memcpy(head + kHeadPrefixBytes, message.data(), message.size());
  // Only the bytes in use are meaningful; the rest of the frame is zero so no
  // stale memory leaves the process.
  if (inline_body) std::memset(head + kHeadPrefixBytes + message.size(), 0, kInlineBytes - message.size());
  else std::memset(head + kHeadPrefixBytes, 0, kInlineBytes);
  const P2POptions options{.tag = tag, .timeout = timeout};
  if (inline_body) {
    channel.send_bytes({head, sizeof head}, dst, options);
    return;
  }
  Request first = channel.isend_bytes({head, sizeof head}, dst, options);
  channel.send_bytes(message, dst, options);
  first.wait();
}

namespace {

// The message length a head frame announces; ProtocolError for a wrong magic or a
// length over `max_bytes`.
uint32_t head_length(const uint8_t* head, int src, size_t max_bytes) {
  uint32_t magic = 0;
  uint32_t length = 0;
  std::memcpy(&magic, head, 4);
  std::memcpy(&length, head + 4, 4);
  if (magic != kMagic) {
    THD_THROW(protocol::ProtocolError, "receive", "message head from rank {} has magic {:#x}, expected {:#x}", src,
              magic, kMagic);
  }
  if (length > max_bytes) {
    THD_THROW(protocol::ProtocolError, "receive", "message of {} bytes from rank {} exceeds the limit of {} bytes",
              length, src, max_bytes);
  }
  return length;
}

}  // namespace

namespace {

// A failed head receive: the channel's own errors as they are, a message that is
// not a head frame (wrong size or dtype) as the ProtocolError it is here.
template <typename Receive>
void receive_head(Receive&& receive, int src) {
  try {
    receive();
  } catch (const TimeoutError&) {
    throw;
  } catch (const ValueError& e) {
    THD_THROW(protocol::ProtocolError, "receive", "malformed message head from rank {}: {}", src, e.what());
  } catch (const TypeError& e) {  // a typed message where the head belongs
    THD_THROW(protocol::ProtocolError, "receive", "malformed message head from rank {}: {}", src, e.what());
  }
}

std::vector<uint8_t> message_after_head(DataChannel& channel, const uint8_t* head, int src, int64_t tag,
                                        size_t max_bytes, std::chrono::milliseconds timeout) {
  const uint32_t length = head_length(head, src, max_bytes);
  if (length <= kInlineBytes) return {head + kHeadPrefixBytes, head + kHeadPrefixBytes + length};
  std::vector<uint8_t> body(length);
  channel.recv_bytes(body, src, {.tag = tag, .timeout = timeout});
  return body;
}

}  // namespace

std::vector<uint8_t> recv_message(DataChannel& channel, int src, int64_t tag, size_t max_bytes,
                                  std::chrono::milliseconds timeout, std::chrono::microseconds yield_spin) {
  uint8_t head[kHeadFrameBytes];
  receive_head(
      [&] {
        channel.recv_bytes({head, sizeof head}, src, {.tag = tag, .timeout = timeout, .yield_spin = yield_spin});
      },
      src);
  return message_after_head(channel, head, src, tag, max_bytes, timeout);
}

PostedMessage::PostedMessage(DataChannel& channel, int source, int64_t tag, std::chrono::milliseconds timeout)
    : channel_(channel),
      source_(source),
      tag_(tag),
      timeout_(timeout),
      request_(channel.irecv_bytes({head_, sizeof head_}, source, {.tag = tag, .timeout = timeout})) {}

PostedMessage::~PostedMessage() {
  try {
    request_.cancel();  // no-op once finished; otherwise the channel must let go of head_
  } catch (...) {
  }
}

std::span<const uint8_t> PostedMessage::wait() {
  receive_head([&] { request_.wait(); }, source_);
  const uint32_t length = head_length(head_, source_, kInlineBytes);
  return {head_ + kHeadPrefixBytes, length};
}

std::optional<std::span<const uint8_t>> PostedMessage::wait_for(std::chrono::milliseconds within) {
  WaitStatus status = WaitStatus::Timeout;
  receive_head([&] { status = request_.wait_for(within); }, source_);
  if (status == WaitStatus::Timeout) return std::nullopt;
  const uint32_t length = head_length(head_, source_, kInlineBytes);
  return std::span<const uint8_t>{head_ + kHeadPrefixBytes, length};
}

std::vector<uint8_t> PostedMessage::wait_message(size_t max_bytes) {
  receive_head([&] { request_.wait(); }, source_);
  return message_after_head(channel_, head_, source_, tag_, max_bytes, timeout_);
}

MessageReceiver::MessageReceiver(std::shared_ptr<DataChannel> channel, int source, int64_t tag, size_t max_bytes,
                                 bool passive)
    : channel_(std::move(channel)),
      source_(source),
      tag_(tag),
      max_bytes_(max_bytes),
      passive_(passive),
      head_(kHeadFrameBytes) {
  post();
}

MessageReceiver::~MessageReceiver() {
  try {
    pending_.cancel();
  } catch (...) {  // a channel already shut down has failed it already
  }
}

void MessageReceiver::post() {
  pending_ = channel_->irecv_bytes(head_, source_,
                                   {.tag = tag_, .timeout = kPostedReceiveLifetime, .passive_wait = passive_});
}

bool MessageReceiver::next(Received& out, std::chrono::milliseconds poll, std::chrono::milliseconds body_timeout) {
  try {
    if (pending_.wait_for(poll) == WaitStatus::Timeout) return false;  // still posted: poll again later
  } catch (const ValueError& e) {
    // A frame of the wrong size (a peer not speaking this protocol): the channel
    // discarded it; keep listening.
    post();
    THD_THROW(protocol::ProtocolError, "receive", "malformed message head: {}", e.what());
  } catch (const TypeError& e) {
    // A typed message (a tensor's dtype) where a head belongs: discarded as well.
    post();
    THD_THROW(protocol::ProtocolError, "receive", "malformed message head: {}", e.what());
  }
  out.source = pending_.source();
  uint32_t length = 0;
  try {
    length = head_length(head_.data(), out.source, max_bytes_);
  } catch (...) {
    post();
    throw;
  }
  if (length <= kInlineBytes) {
    out.bytes.assign(head_.begin() + kHeadPrefixBytes, head_.begin() + kHeadPrefixBytes + length);
    post();
    return true;
  }
  // The body is the next message from that source on this tag: receive it before
  // posting the next head, which would otherwise match it first.
  out.bytes.resize(length);
  // A message of another size or kind where the body belongs is malformed, as a bad
  // head is; a body that does not come (TimeoutError) and the channel's own
  // failures (PeerLost) are the caller's to judge.
  auto malformed = [&](const Error& e) {
    post();
    THD_THROW(protocol::ProtocolError, "receive", "message body of {} bytes from rank {} is malformed: {}", length,
              out.source, e.what());
  };
  try {
    channel_->recv_bytes(out.bytes, out.source, {.tag = tag_, .timeout = body_timeout, .passive_wait = passive_});
  } catch (const ValueError& e) {
    malformed(e);
  } catch (const TypeError& e) {
    malformed(e);
  } catch (...) {
    post();
    throw;
  }
  post();
  return true;
}

}  // namespace thd::protocol
