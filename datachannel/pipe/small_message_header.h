// The header of a small point-to-point message on a pipe's control tag: 16 bytes in
// place of the full 48-byte frame header (datachannel/wire.h), which a point-to-point
// message mostly fills with fields it does not use (op, reduce, root, the payload
// size its control message already gives, a rendezvous id). The bytes show on a
// small message's round trip: over UCX's shared memory, messages of up to 24 bytes
// cost the same, and ones of 32 bytes or more 17-27 ns more a round trip (raw
// UCX). An 8-byte payload is 24 bytes with this header, 56 with the full one.
//
//   marker[u8] = 0xC5  dtype[u8]  count[u16]  context[u32]  tag[i64]   (little-endian)
//
// The marker tells it from the other control messages, which all begin with 't'
// ("thdF" frames, "thdA" token proofs, "thdB" heartbeats). It stands for a whole
// message (FrameKind::Message) of kind {P2P, dtype, reduce 0, root -1, count}, whose
// payload is the rest of the control message. Anything else keeps the full header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "datachannel/envelope.h"
#include "datachannel/wire.h"

namespace thd::detail::pipe {

inline constexpr uint8_t kSmallMessageMarker = 0xC5;
inline constexpr size_t kSmallHeaderBytes = 16;

// Whether a whole message of this envelope can go with the small header.
inline bool fits_small_header(const Envelope& envelope) noexcept {
  const MessageKind& k = envelope.kind;
  return k.op == MessageOp::P2P && k.reduce == 0 && k.root == -1 && k.count <= 0xFFFF && envelope.tag >= 0;
}

inline void write_small_header(uint8_t* out, const Envelope& envelope) noexcept {
  out[0] = kSmallMessageMarker;
  out[1] = envelope.kind.dtype;
  detail::le::put<uint16_t>(out + 2, static_cast<uint16_t>(envelope.kind.count));
  detail::le::put<uint32_t>(out + 4, envelope.context);
  detail::le::put<int64_t>(out + 8, envelope.tag);
}

// Reads the small header at the front of a `bytes`-long control message: false when
// it is not one (too short, another marker, a negative tag). The payload is the
// rest of the message.
inline bool read_small_header(const uint8_t* p, size_t bytes, detail::FrameHeader* out) noexcept {
  if (bytes < kSmallHeaderBytes || p[0] != kSmallMessageMarker) return false;
  const auto tag = detail::le::get<int64_t>(p + 8);
  if (tag < 0) return false;
  out->envelope.context = detail::le::get<uint32_t>(p + 4);
  out->envelope.tag = tag;
  out->envelope.kind = MessageKind{MessageOp::P2P, p[1], 0, -1, detail::le::get<uint16_t>(p + 2)};
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
