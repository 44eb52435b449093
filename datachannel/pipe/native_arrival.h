// What a message the library matched itself was, from its receive's envelope and
// what the message's tag and length say: the envelope a mismatch is named with.
#pragma once

#include <cstddef>
#include <cstdint>

#include <thd/dtype.h>

#include "datachannel/envelope.h"

namespace thd::detail::pipe {

// The envelope of a message of `bytes` with `dtype` (a DType's value or
// kRawBytes) that matched a receive posted with `posted`: a point-to-point
// message's kind is its dtype and element count, the rest is the receive's.
inline Envelope native_arrival(const Envelope& posted, uint8_t dtype, size_t bytes) {
  Envelope got = posted;
  got.kind = MessageKind{};
  got.kind.op = MessageOp::P2P;
  got.kind.dtype = dtype;
  got.kind.count = dtype == kRawBytes ? bytes : bytes / element_size(static_cast<DType>(dtype));
  return got;
}

}  // namespace thd::detail::pipe
