#include "datachannel/pipe/direct_recv.h"

#include "datachannel/pipe/native_arrival.h"

namespace thd::detail::pipe {

void DirectRecv::done(std::exception_ptr error, size_t bytes) noexcept {
  if (error == nullptr && is_posted_message(bytes)) [[likely]] {
    state.complete(source_, bytes);
    return;
  }
  const MessagePipe::NativeOrigin origin = pipe_.native_origin(tags_.arrived);
  // Decoded (a pipe that expects no tag): the message the receive was posted for
  // when its dtype and length are the receive's (the library matched the rest).
  if (error == nullptr && bytes == data_.size() && origin.dtype == envelope_.kind.dtype) {
    state.complete(origin.sender, bytes);
    return;
  }
  const Envelope got = native_arrival(envelope_, origin.dtype, bytes);
  if (error != nullptr) {
    // A message longer than the receive (the pipe gives its length): named as any
    // mismatch is, with both kinds and lengths.
    if (bytes > 0) error = message_mismatch(state.rank, origin.sender, envelope_, data_.size(), got, bytes);
    state.fail(std::move(error));
    return;
  }
  if (auto mismatch = check_match(state.rank, origin.sender, envelope_, data_.size(), got, bytes)) {
    state.fail(std::move(mismatch));
    return;
  }
  state.complete(origin.sender, bytes);
}

}  // namespace thd::detail::pipe
