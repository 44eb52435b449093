// The short header of a small point-to-point message: 16 bytes in place of the
// full 48-byte frame header (wire.h), which a point-to-point message mostly fills
// with fields it does not use (op, reduce, root, a rendezvous id). tcp sends every
// whole point-to-point message of up to 65,535 elements with it; the pipe
// transport (mpi, ucx, libfabric) every such message on its control tag. The bytes
// show on a small message's round trip, and on a master-worker command batch of
// one op (about 140 bytes of its own).
//
//   marker[u8] = 0xC5  dtype[u8]  count[u16]  context[u32]  tag[i64]   (little-endian)
//
// The marker tells it from a full header, which begins with 't' ("thdF"), as do
// the pipe's other control messages ("thdA" token proofs, "thdB" heartbeats). It
// stands for a whole message (FrameKind::Message) of kind {P2P, dtype, reduce 0,
// root -1, count}. Its payload is `count` elements of `dtype` (bytes for raw
// messages): tcp reads that many after the header; a pipe's control message is
// the header and its payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include <thd/dtype.h>

#include "datachannel/envelope.h"
#include "datachannel/wire.h"

namespace thd::detail {

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
  le::put<uint16_t>(out + 2, static_cast<uint16_t>(envelope.kind.count));
  le::put<uint32_t>(out + 4, envelope.context);
  le::put<int64_t>(out + 8, envelope.tag);
}

// Reads the envelope of the small header at `p` (kSmallHeaderBytes of it): false
// when it is not one (another marker, a negative tag).
inline bool read_small_envelope(const uint8_t* p, Envelope* out) noexcept {
  if (p[0] != kSmallMessageMarker) return false;
  const auto tag = le::get<int64_t>(p + 8);
  if (tag < 0) return false;
  out->context = le::get<uint32_t>(p + 4);
  out->tag = tag;
  out->kind = MessageKind{MessageOp::P2P, p[1], 0, -1, le::get<uint16_t>(p + 2)};
  return true;
}

// The payload bytes of a small header's message: count elements of its dtype;
// nullopt for a dtype code that names none.
inline std::optional<size_t> small_payload_bytes(const MessageKind& kind) noexcept {
  if (kind.dtype == kRawBytes) return static_cast<size_t>(kind.count);
  if (kind.dtype >= kNumDTypes) return std::nullopt;
  return static_cast<size_t>(kind.count) * element_size(static_cast<DType>(kind.dtype));
}

}  // namespace thd::detail
