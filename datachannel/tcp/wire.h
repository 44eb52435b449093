// The tcp backend's bytes on the wire (docs/tcp_backend.md, "Wire format").
//
// After the auth handshake (net/auth.h) each side of a connection sends one
// identity Hello; from then on the stream is a sequence of frames, each a fixed
// 40-byte header followed by its payload, all integers little-endian:
//
//   Hello (32 B)        magic "thdT"[4] version[u32] rank[i32] world_size[i32]
//                       channel_id[16]
//   FrameHeader (40 B)  magic "thdF"[4] context[u32] tag[i64] payload_bytes[u64]
//                       count[u64] root[i32] op[u8] dtype[u8] reduce[u8] reserved[u8]=0
//
// Everything read from a socket is checked by the decoders below before it is
// used: a peer that sends bytes they refuse is disconnected, never trusted.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "datachannel/envelope.h"

namespace thd::detail::tcp {

inline constexpr uint32_t kWireVersion = 1;

// ---- identity hello ---------------------------------------------------------------

inline constexpr size_t kChannelIdBytes = 16;
using ChannelId = std::array<uint8_t, kChannelIdBytes>;

inline constexpr size_t kHelloBytes = 4 + 4 + 4 + 4 + kChannelIdBytes;
using HelloBytes = std::array<uint8_t, kHelloBytes>;

// Who is at the other end of a fresh, authenticated connection: a rank of this
// channel (the same channel id: the same job and the same DataChannel), or
// someone to hang up on.
struct Hello {
  int32_t rank = -1;
  int32_t world_size = -1;
  ChannelId channel{};
};

HelloBytes encode_hello(const Hello& hello);
// False (and why) for bytes that are not a Hello of this wire version.
bool decode_hello(std::span<const uint8_t, kHelloBytes> bytes, Hello* out, std::string* why);

// ---- message frames ---------------------------------------------------------------

inline constexpr size_t kFrameHeaderBytes = 40;
using FrameHeaderBytes = std::array<uint8_t, kFrameHeaderBytes>;

// No payload may claim more (256 TiB): a header that does is corrupt. Payloads are
// never allocated from this number alone (see the unexpected-message budget in
// tcp_transport_impl.h), it only rejects nonsense early.
inline constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 48;

struct FrameHeader {
  Envelope envelope;
  uint64_t payload_bytes = 0;
};

FrameHeaderBytes encode_frame_header(const Envelope& envelope, uint64_t payload_bytes);
// False (and why) for bytes that are not a valid frame header: wrong magic, an
// unknown op, a negative tag, a nonzero reserved byte, an implausible size.
bool decode_frame_header(std::span<const uint8_t, kFrameHeaderBytes> bytes, FrameHeader* out, std::string* why);

}  // namespace thd::detail::tcp
