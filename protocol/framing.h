// The protocol's messages over a DataChannel: each message (a command batch, a
// reply, a notice) is one message of bytes of its own length, received whatever
// its length (DataChannel::irecv_message); tensor payloads travel beside it as
// messages of their own. A message that breaks the framing (longer than the
// receiver allows, or a tensor's where bytes belong) is a ProtocolError.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>

#include <thd/datachannel.h>

#include "protocol/codec.h"

namespace thd::protocol {

// Sends `message` to `dst` on `tag`.
void send_message(DataChannel& channel, int dst, int64_t tag, std::span<const uint8_t> message,
                  std::chrono::milliseconds timeout);

// Receives one message from `src` on `tag` (a one-off exchange, e.g. the status
// that precedes a worker-to-worker copy). ProtocolError for a message over
// `max_bytes` or not of bytes. `yield_spin`: how long the wait polls, yielding,
// before it blocks (P2POptions::yield_spin).
Message recv_message(DataChannel& channel, int src, int64_t tag, size_t max_bytes, std::chrono::milliseconds timeout,
                     std::chrono::microseconds yield_spin = {});

// One message expected on a tag of its own, e.g. a sync's answer: its receive is
// posted when this is made (before the command that triggers the message leaves),
// and the thread that needs the message waits on it directly, or looks at
// something else meanwhile (a stream that also polls a notice board). Destroying
// it withdraws a receive still posted.
class PostedMessage {
 public:
  PostedMessage(DataChannel& channel, int source, int64_t tag, std::chrono::milliseconds timeout,
                size_t max_bytes = kMaxMessageBytes);
  ~PostedMessage();
  PostedMessage(const PostedMessage&) = delete;
  PostedMessage& operator=(const PostedMessage&) = delete;

  // True once the receive has finished, well or not. Never blocks.
  bool test() const { return request_.test(); }
  // The message, which stays valid while this lives. The channel's errors
  // (PeerLost, TimeoutError), ProtocolError for a malformed message.
  std::span<const uint8_t> wait();
  // As wait(), but gives up after `within` and returns nothing (no error: the
  // receive stays posted and may be waited on again).
  std::optional<std::span<const uint8_t>> wait_for(std::chrono::milliseconds within);
  // As wait(), the message handed over (the caller keeps it past this object).
  Message wait_message();

 private:
  std::span<const uint8_t> take();

  int source_;
  Request request_;
  Message message_;
  bool taken_ = false;
};

// Receives messages on one (source, tag): a receive stays posted between calls,
// so a caller may poll with short timeouts without losing a message.
class MessageReceiver {
 public:
  // passive: a listener on a background thread, which waits without spinning or
  // driving the channel's progress (P2POptions::passive_wait).
  MessageReceiver(std::shared_ptr<DataChannel> channel, int source, int64_t tag, size_t max_bytes,
                  bool passive = false);
  ~MessageReceiver();
  MessageReceiver(const MessageReceiver&) = delete;
  MessageReceiver& operator=(const MessageReceiver&) = delete;

  // The next message (Message::source says who sent it), or false when none
  // arrived within `poll`. Throws the
  // channel's errors (PeerLost, ...) and ProtocolError for a malformed message
  // (longer than max_bytes, or a tensor's). The receiver keeps listening after
  // each of them.
  bool next(Message& out, std::chrono::milliseconds poll);

 private:
  void post();

  std::shared_ptr<DataChannel> channel_;
  int source_;
  int64_t tag_;
  size_t max_bytes_;
  bool passive_;
  Request pending_;
};

}  // namespace thd::protocol
