// thd's frames: the tcp backend's bytes on the wire (docs/backend_tcp.md, "Wire
// format"), whose frame header is also the pipe transport's control message
// (pipe/pipe_transport.h), so both backends share this one codec.
//
// After the auth handshake (net/auth.h) each side of a connection sends one
// identity Hello; from then on the stream is a sequence of frames, each a fixed
// 48-byte header followed by its payload, all integers little-endian:
//
//   Hello (32 B)        magic "thdT"[4] version[u32] rank[i32] world_size[i32]
//                       channel_id[16]
//   FrameHeader (48 B)  magic "thdF"[4] context[u32] tag[i64] payload_bytes[u64]
//                       count[u64] root[i32] op[u8] dtype[u8] reduce[u8] kind[u8]
//                       rendezvous_id[u64]
//
// A frame is a whole message (kind Message), or one step of a large message's
// rendezvous (docs/backend_tcp.md, "Rendezvous"): the sender announces it
// (ReadyToSend, no payload), the receiver asks for it once a receive matched it
// (ClearToSend) or refuses it (Decline), the payload follows as Data; a sender
// that gives up on an announced message says so (Revoke). A rank that closes its
// channel says Goodbye before its end-of-stream, so that its peers can tell a rank
// that finished and left from one that died.
//
// Everything read from a socket is checked by the decoders below before it is
// used: a peer that sends bytes they refuse is disconnected, never trusted.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>

#include "datachannel/envelope.h"

namespace thd::detail {

inline constexpr uint32_t kWireVersion = 3;

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

inline constexpr size_t kFrameHeaderBytes = 48;
using FrameHeaderBytes = std::array<uint8_t, kFrameHeaderBytes>;

// No payload may claim more (256 TiB): a header that does is corrupt. Payloads are
// never allocated from this number alone (see the unexpected-message budget in
// tcp_transport_impl.h), it only rejects nonsense early.
inline constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 48;

enum class FrameKind : uint8_t {
  Message = 0,      // envelope + payload: a whole message
  ReadyToSend = 1,  // envelope, payload_bytes = the message's size, no payload follows
  ClearToSend = 2,  // receiver -> sender: send the announced message's payload
  Decline = 3,      // receiver -> sender: the matched receive refused it, send nothing
  Data = 4,         // the announced message's payload
  Revoke = 5,       // sender -> receiver: the announced message will not come
  Goodbye = 6,      // the sender closes its channel: it has finished, nothing is lost
};

struct FrameHeader {
  Envelope envelope;  // Message and ReadyToSend only
  uint64_t payload_bytes = 0;
  FrameKind kind = FrameKind::Message;
  uint64_t rendezvous_id = 0;  // the sender's id of an announced message; 0 for Message
};

// ---- field access ---------------------------------------------------------------
// Little-endian fields, whatever the host's byte order, and never through struct
// padding. A little-endian host copies them whole: every message's header goes
// through here, and byte loops were a tenth of a small message's cost.
namespace le {
template <typename T>
void put(uint8_t* p, T value) noexcept {
  using U = std::make_unsigned_t<T>;
  const auto v = static_cast<U>(value);
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &v, sizeof(U));
  } else {
    for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
  }
}
template <typename T>
T get(const uint8_t* p) noexcept {
  using U = std::make_unsigned_t<T>;
  U v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, p, sizeof(U));
  } else {
    for (size_t i = 0; i < sizeof(T); ++i) v = static_cast<U>(v | static_cast<U>(U{p[i]} << (8 * i)));
  }
  return static_cast<T>(v);
}
}  // namespace le

inline constexpr std::array<uint8_t, 4> kFrameMagic = {'t', 'h', 'd', 'F'};

// Writes a frame header into out[0, kFrameHeaderBytes). Inline, like
// read_frame_header: the message-library backends write and read one per small
// message on a round trip's latency path (pipe_transport.cpp).
inline void write_frame_header(uint8_t* out, const Envelope& envelope, uint64_t payload_bytes,
                               FrameKind kind = FrameKind::Message, uint64_t rendezvous_id = 0) noexcept {
  std::memcpy(out, kFrameMagic.data(), 4);
  le::put<uint32_t>(out + 4, envelope.context);
  le::put<int64_t>(out + 8, envelope.tag);
  le::put<uint64_t>(out + 16, payload_bytes);
  le::put<uint64_t>(out + 24, envelope.kind.count);
  le::put<int32_t>(out + 32, envelope.kind.root);
  out[36] = static_cast<uint8_t>(envelope.kind.op);
  out[37] = envelope.kind.dtype;
  out[38] = envelope.kind.reduce;
  out[39] = static_cast<uint8_t>(kind);
  le::put<uint64_t>(out + 40, rendezvous_id);
}

FrameHeaderBytes encode_frame_header(const Envelope& envelope, uint64_t payload_bytes,
                                     FrameKind kind = FrameKind::Message, uint64_t rendezvous_id = 0);
// A rendezvous step other than the announcement: no envelope.
FrameHeaderBytes encode_rendezvous_frame(FrameKind kind, uint64_t rendezvous_id, uint64_t payload_bytes = 0);

// Reads a frame header: false for bytes that are not a valid one (wrong magic, an
// unknown op or frame kind, a negative tag, an implausible size, a payload on a
// control frame, a rendezvous id where none belongs or none where one does).
// Says nothing about why: decode_frame_header is this plus the reason.
inline bool read_frame_header(const uint8_t* p, FrameHeader* out) noexcept {
  const auto tag = le::get<int64_t>(p + 8);
  const auto payload = le::get<uint64_t>(p + 16);
  const uint8_t op = p[36];
  const uint8_t kind_byte = p[39];
  const auto id = le::get<uint64_t>(p + 40);
  if (std::memcmp(p, kFrameMagic.data(), 4) != 0 || op > static_cast<uint8_t>(kLastMessageOp) || tag < 0 ||
      payload > kMaxPayloadBytes || kind_byte > static_cast<uint8_t>(FrameKind::Goodbye)) {
    return false;
  }
  const auto kind = static_cast<FrameKind>(kind_byte);
  const bool control = kind == FrameKind::ClearToSend || kind == FrameKind::Decline || kind == FrameKind::Revoke ||
                       kind == FrameKind::Goodbye;
  const bool carries_id = kind != FrameKind::Message && kind != FrameKind::Goodbye;
  if ((control && payload != 0) || carries_id != (id != 0)) return false;
  out->envelope.context = le::get<uint32_t>(p + 4);
  out->envelope.tag = tag;
  out->envelope.kind.op = static_cast<MessageOp>(op);
  out->envelope.kind.dtype = p[37];
  out->envelope.kind.reduce = p[38];
  out->envelope.kind.root = le::get<int32_t>(p + 32);
  out->envelope.kind.count = le::get<uint64_t>(p + 24);
  out->payload_bytes = payload;
  out->kind = kind;
  out->rendezvous_id = id;
  return true;
}

// read_frame_header, saying why when it refuses.
bool decode_frame_header(std::span<const uint8_t, kFrameHeaderBytes> bytes, FrameHeader* out, std::string* why);

}  // namespace thd::detail
