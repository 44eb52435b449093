#include "protocol/framing.h"

#include "tensor/check.h"

namespace thd::protocol {

namespace {

// A posted receive lives until the channel's own deadline; the runtime's pollers
// cancel it at shutdown, so "forever" here only has to outlast a session.
constexpr std::chrono::milliseconds kPostedReceiveLifetime = std::chrono::hours(24 * 365);

// Runs a receive's wait; a message the channel refused as malformed for this
// framing (too long: ValueError; a tensor's: TypeError) is the ProtocolError it
// is here. The channel's own failures (TimeoutError, PeerLost) pass as they are.
template <typename Wait>
auto checked(Wait&& wait, int src) {
  try {
    return wait();
  } catch (const TimeoutError&) {
    throw;
  } catch (const ValueError& e) {
    THD_THROW(protocol::ProtocolError, "receive", "malformed message from rank {}: {}", src, e.what());
  } catch (const TypeError& e) {
    THD_THROW(protocol::ProtocolError, "receive", "malformed message from rank {}: {}", src, e.what());
  }
}

}  // namespace

void send_message(DataChannel& channel, int dst, int64_t tag, std::span<const uint8_t> message,
                  std::chrono::milliseconds timeout) {
  channel.send_bytes(message, dst, {.tag = tag, .timeout = timeout});
}

Message recv_message(DataChannel& channel, int src, int64_t tag, size_t max_bytes, std::chrono::milliseconds timeout,
                     std::chrono::microseconds yield_spin) {
  return checked([&] { return channel.recv_message(src, max_bytes, {.tag = tag, .timeout = timeout,
                                                                     .yield_spin = yield_spin}); },
                 src);
}

PostedMessage::PostedMessage(DataChannel& channel, int source, int64_t tag, std::chrono::milliseconds timeout,
                             size_t max_bytes)
    : source_(source), request_(channel.irecv_message(source, max_bytes, {.tag = tag, .timeout = timeout})) {}

PostedMessage::~PostedMessage() {
  try {
    request_.cancel();  // no-op once finished; otherwise the channel lets the receive go
  } catch (...) {
  }
}

std::span<const uint8_t> PostedMessage::take() {
  if (!taken_) {
    message_ = request_.take_message();
    taken_ = true;
  }
  return message_.bytes();
}

std::span<const uint8_t> PostedMessage::wait() {
  checked([&] { request_.wait(); }, source_);
  return take();
}

std::optional<std::span<const uint8_t>> PostedMessage::wait_for(std::chrono::milliseconds within) {
  if (checked([&] { return request_.wait_for(within); }, source_) == WaitStatus::Timeout) return std::nullopt;
  return take();
}

Message PostedMessage::wait_message() {
  (void)wait();
  return std::move(message_);
}

MessageReceiver::MessageReceiver(std::shared_ptr<DataChannel> channel, int source, int64_t tag, size_t max_bytes,
                                 bool passive)
    : channel_(std::move(channel)), source_(source), tag_(tag), max_bytes_(max_bytes), passive_(passive) {
  post();
}

MessageReceiver::~MessageReceiver() {
  try {
    pending_.cancel();
  } catch (...) {  // a channel already shut down has failed it already
  }
}

void MessageReceiver::post() {
  pending_ = channel_->irecv_message(source_, max_bytes_,
                                     {.tag = tag_, .timeout = kPostedReceiveLifetime, .passive_wait = passive_});
}

bool MessageReceiver::next(Message& out, std::chrono::milliseconds poll) {
  try {
    if (checked([&] { return pending_.wait_for(poll); }, source_) == WaitStatus::Timeout) return false;
  } catch (...) {
    // Keep listening: the channel discarded a malformed message, and a receive
    // from any source goes on with the other senders when one is lost. A channel
    // that takes no receive any more (shut down) keeps the failed one, whose
    // error the next call throws again.
    try {
      post();
    } catch (...) {
    }
    throw;
  }
  out = pending_.take_message();
  post();
  return true;
}

}  // namespace thd::protocol
