// A blocking receive on PipeTransport's direct path (pipe_transport.h): posted
// straight to the pipe (MessagePipe::recv_direct), with no record, match queue
// entry or shared request of the engine's. This is the op the pipe reports to; it
// lives on the waiting thread's stack with the request it finishes.
//
// The checks are the engine's for a message the library matched (pipe_engine.h):
// the message's dtype, from its tag, and its length against the receive's; a
// message of another kind or length fails the request with the mismatch, named as
// any is. The common case, a message carrying exactly the tag the pipe expects
// (MessagePipe::DirectTags), is checked without decoding its tag: its completion
// sits between the message's arrival and the answer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>

#include "datachannel/envelope.h"
#include "datachannel/pipe/message_pipe.h"
#include "datachannel/request_state.h"

namespace thd::detail::pipe {

class DirectRecv final : public PipeOp {
 public:
  // `envelope` and `data` are the caller's, alive until the receive ends.
  DirectRecv(const RequestSpec& spec, Transport* transport, const MessagePipe& pipe, std::span<uint8_t> data,
             const Envelope& envelope, int source)
      : state(spec, transport), pipe_(pipe), data_(data), envelope_(envelope), source_(source) {}

  // Finishes `state`: nothing touches this object after that, as its waiter may
  // return the moment it sees the request finished.
  void done(std::exception_ptr error, size_t bytes) noexcept override;
  // done() for a message that arrived whole, with its tag: what a pipe's own
  // completion of a direct receive calls, sparing the common case done()'s error
  // argument and virtual call (it sits between a message's arrival and the
  // answer).
  void arrived(uint64_t tag, size_t bytes) noexcept {
    tags_.arrived = tag;
    if (is_posted_message(bytes)) [[likely]] {
      state.complete(source_, bytes);
      return;
    }
    done(nullptr, bytes);
  }

  std::span<uint8_t> data() const noexcept { return data_; }
  const Envelope& envelope() const noexcept { return envelope_; }
  // The world rank it receives from (never kAnySource: see PipeEngine::direct_recv_allowed).
  int source() const noexcept { return source_; }
  // Where the pipe writes the tag it expects and the message's own (before done()).
  MessagePipe::DirectTags* tags() noexcept { return &tags_; }

  RequestState state;

 private:
  // The message arrived (tags_.arrived) is the one the receive was posted for, to
  // the bit: nothing to decode.
  bool is_posted_message(size_t bytes) const noexcept {
    return tags_.arrived == tags_.expected && tags_.expected != 0 && bytes == data_.size();
  }

  const MessagePipe& pipe_;
  const std::span<uint8_t> data_;
  const Envelope& envelope_;
  const int source_;
  MessagePipe::DirectTags tags_;
};

}  // namespace thd::detail::pipe
