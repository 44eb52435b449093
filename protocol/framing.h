// Messages of any size over a DataChannel, whose receives need the exact size up
// front: a fixed-size head frame carries the length and, for small messages (the
// common case: a batch of a few ops, a reply), the message itself; a larger
// message follows the head as a second frame on the same tag, which the
// DataChannel's non-overtaking rule keeps in order.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <thd/datachannel.h>

namespace thd::protocol {

inline constexpr size_t kHeadFrameBytes = 1024;
inline constexpr size_t kHeadPrefixBytes = 8;  // magic + length
inline constexpr size_t kInlineBytes = kHeadFrameBytes - kHeadPrefixBytes;

// Sends `message` to `dst` on `tag`. Only one thread may send on a (dst, tag) at a
// time (callers hold their link's lock).
void send_message(DataChannel& channel, int dst, int64_t tag, std::span<const uint8_t> message,
                  std::chrono::milliseconds timeout);

// One received message.
struct Received {
  int source = -1;
  std::vector<uint8_t> bytes;
};

// Receives one message from `src` on `tag` (a one-off exchange, e.g. the status
// that precedes a worker-to-worker copy). ProtocolError for a malformed head.
// `yield_spin`: how long the wait polls, yielding, before it blocks
// (P2POptions::yield_spin).
std::vector<uint8_t> recv_message(DataChannel& channel, int src, int64_t tag, size_t max_bytes,
                                  std::chrono::milliseconds timeout, std::chrono::microseconds yield_spin = {});

// One message expected on a tag of its own, e.g. a sync's answer: the head's
// receive is posted when this is made (before the command that triggers the
// message leaves), and the thread that needs the message waits on it directly,
// or looks at something else meanwhile (a stream that also polls a notice board).
// Destroying it withdraws a receive still posted.
class PostedMessage {
 public:
  PostedMessage(DataChannel& channel, int source, int64_t tag, std::chrono::milliseconds timeout);
  ~PostedMessage();
  PostedMessage(const PostedMessage&) = delete;
  PostedMessage& operator=(const PostedMessage&) = delete;

  // True once the head's receive has finished, well or not. Never blocks.
  bool test() const { return request_.test(); }
  // A message that fits the head frame; the channel's errors (PeerLost,
  // TimeoutError), ProtocolError for a malformed head or a longer message.
  std::span<const uint8_t> wait();
  // As wait(), but gives up after `within` and returns nothing (no error: the
  // receive stays posted and may be waited on again).
  std::optional<std::span<const uint8_t>> wait_for(std::chrono::milliseconds within);
  // A message of up to `max_bytes`: its body, if the head announces one, is
  // received now. Errors as wait(); ProtocolError for a message over `max_bytes`.
  std::vector<uint8_t> wait_message(size_t max_bytes);

 private:
  DataChannel& channel_;
  int source_;
  int64_t tag_;
  std::chrono::milliseconds timeout_;
  uint8_t head_[kHeadFrameBytes];
  Request request_;
};

// Receives messages on one (source, tag): the head frame's receive stays posted
// between calls, so a caller may poll with short timeouts without losing a message.
class MessageReceiver {
 public:
  // passive: a listener on a background thread, which waits without spinning or
  // driving the channel's progress (P2POptions::passive_wait).
  MessageReceiver(std::shared_ptr<DataChannel> channel, int source, int64_t tag, size_t max_bytes,
                  bool passive = false);
  ~MessageReceiver();
  MessageReceiver(const MessageReceiver&) = delete;
  MessageReceiver& operator=(const MessageReceiver&) = delete;

  // The next message, or false when none arrived within `poll`. Throws the
  // channel's errors (PeerLost, ...), TimeoutError when a body announced by its
  // head does not arrive within `body_timeout`, and ProtocolError for a malformed
  // head or body (a frame of another size or kind). The receiver keeps listening
  // after each of them.
  bool next(Received& out, std::chrono::milliseconds poll, std::chrono::milliseconds body_timeout);

 private:
  void post();

  std::shared_ptr<DataChannel> channel_;
  int source_;
  int64_t tag_;
  size_t max_bytes_;
  bool passive_;
  std::vector<uint8_t> head_;
  Request pending_;
};

}  // namespace thd::protocol
