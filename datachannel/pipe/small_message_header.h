// The header of a whole message on a pipe's control tag: the small header
// (datachannel/small_header.h) for a small point-to-point message, the full frame
// header otherwise. Over UCX's shared memory, messages of up to 24 bytes cost the
// same, and ones of 32 bytes or more 17-27 ns more a round trip (raw UCX): an
// 8-byte payload is 24 bytes with the small header, 56 with the full one. A small
// header's payload is the rest of the control message.
#pragma once

#include <cstddef>
#include <cstdint>

#include "datachannel/envelope.h"
#include "datachannel/small_header.h"
#include "datachannel/wire.h"

namespace thd::detail::pipe {

// Reads the small header at the front of a `bytes`-long control message: false when
// it is not one (too short, another marker, a negative tag). The payload is the
// rest of the message.
inline bool read_small_header(const uint8_t* p, size_t bytes, detail::FrameHeader* out) noexcept {
  if (bytes < kSmallHeaderBytes || !detail::read_small_envelope(p, &out->envelope)) return false;
  out->payload_bytes = bytes - kSmallHeaderBytes;
  out->kind = detail::FrameKind::Message;
  out->rendezvous_id = 0;
  return true;
}

// The header a whole message of this envelope goes with: written at `out` (room
// for detail::kFrameHeaderBytes), its size returned.
inline size_t write_message_header(uint8_t* out, const Envelope& envelope, size_t payload_bytes) noexcept {
  if (fits_small_header(envelope)) {
    write_small_header(out, envelope);
    return kSmallHeaderBytes;
  }
  detail::write_frame_header(out, envelope, payload_bytes);
  return detail::kFrameHeaderBytes;
}

inline size_t message_header_bytes(const Envelope& envelope) noexcept {
  return fits_small_header(envelope) ? kSmallHeaderBytes : detail::kFrameHeaderBytes;
}

}  // namespace thd::detail::pipe
