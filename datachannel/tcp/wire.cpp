#include "datachannel/tcp/wire.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <type_traits>

namespace thd::detail::tcp {
namespace {

constexpr std::array<uint8_t, 4> kHelloMagic = {'t', 'h', 'd', 'T'};
constexpr std::array<uint8_t, 4> kFrameMagic = {'t', 'h', 'd', 'F'};

// Little-endian fields, whatever the host's byte order, and never through struct
// padding. A little-endian host copies them whole: every message's header goes
// through here, and the byte loops were a tenth of a small message's cost.
template <typename T>
void put(uint8_t* p, T value) {
  using U = std::make_unsigned_t<T>;
  const auto v = static_cast<U>(value);
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &v, sizeof(U));
  } else {
    for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
  }
}

template <typename T>
T get(const uint8_t* p) {
  using U = std::make_unsigned_t<T>;
  U v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, p, sizeof(U));
  } else {
    for (size_t i = 0; i < sizeof(T); ++i) v = static_cast<U>(v | static_cast<U>(U{p[i]} << (8 * i)));
  }
  return static_cast<T>(v);
}

std::string hex4(const uint8_t* p) { return fmt::format("{:02x}{:02x}{:02x}{:02x}", p[0], p[1], p[2], p[3]); }

}  // namespace

HelloBytes encode_hello(const Hello& hello) {
  HelloBytes b{};
  std::memcpy(b.data(), kHelloMagic.data(), 4);
  put<uint32_t>(b.data() + 4, kWireVersion);
  put<int32_t>(b.data() + 8, hello.rank);
  put<int32_t>(b.data() + 12, hello.world_size);
  std::memcpy(b.data() + 16, hello.channel.data(), kChannelIdBytes);
  return b;
}

bool decode_hello(std::span<const uint8_t, kHelloBytes> bytes, Hello* out, std::string* why) {
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, kHelloMagic.data(), 4) != 0) {
    *why = fmt::format("not a thd tcp backend hello (magic {})", hex4(p));
    return false;
  }
  const auto version = get<uint32_t>(p + 4);
  if (version != kWireVersion) {
    *why = fmt::format("speaks tcp backend wire version {}, this process speaks {}", version, kWireVersion);
    return false;
  }
  out->rank = get<int32_t>(p + 8);
  out->world_size = get<int32_t>(p + 12);
  std::memcpy(out->channel.data(), p + 16, kChannelIdBytes);
  return true;
}

FrameHeaderBytes encode_frame_header(const Envelope& envelope, uint64_t payload_bytes, FrameKind kind,
                                     uint64_t rendezvous_id) {
  FrameHeaderBytes b{};
  std::memcpy(b.data(), kFrameMagic.data(), 4);
  put<uint32_t>(b.data() + 4, envelope.context);
  put<int64_t>(b.data() + 8, envelope.tag);
  put<uint64_t>(b.data() + 16, payload_bytes);
  put<uint64_t>(b.data() + 24, envelope.kind.count);
  put<int32_t>(b.data() + 32, envelope.kind.root);
  b[36] = static_cast<uint8_t>(envelope.kind.op);
  b[37] = envelope.kind.dtype;
  b[38] = envelope.kind.reduce;
  b[39] = static_cast<uint8_t>(kind);
  put<uint64_t>(b.data() + 40, rendezvous_id);
  return b;
}

FrameHeaderBytes encode_rendezvous_frame(FrameKind kind, uint64_t rendezvous_id, uint64_t payload_bytes) {
  return encode_frame_header(Envelope{}, payload_bytes, kind, rendezvous_id);
}

bool decode_frame_header(std::span<const uint8_t, kFrameHeaderBytes> bytes, FrameHeader* out, std::string* why) {
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, kFrameMagic.data(), 4) != 0) {
    *why = fmt::format("bad frame magic {} (the stream is out of step or not from thd)", hex4(p));
    return false;
  }
  const auto tag = get<int64_t>(p + 8);
  const auto payload = get<uint64_t>(p + 16);
  const uint8_t op = p[36];
  if (op > static_cast<uint8_t>(MessageOp::Barrier)) {
    *why = fmt::format("unknown message op code {}", op);
    return false;
  }
  if (tag < 0) {
    *why = fmt::format("negative tag {}", tag);
    return false;
  }
  if (payload > kMaxPayloadBytes) {
    *why = fmt::format("a payload of {} bytes (the limit is {} bytes)", payload, kMaxPayloadBytes);
    return false;
  }
  if (p[39] > static_cast<uint8_t>(FrameKind::Goodbye)) {
    *why = fmt::format("unknown frame kind {}", p[39]);
    return false;
  }
  const auto kind = static_cast<FrameKind>(p[39]);
  const auto id = get<uint64_t>(p + 40);
  const bool control = kind == FrameKind::ClearToSend || kind == FrameKind::Decline ||
                       kind == FrameKind::Revoke || kind == FrameKind::Goodbye;
  if (control && payload != 0) {
    *why = fmt::format("a rendezvous control frame (kind {}) with a payload of {} bytes", p[39], payload);
    return false;
  }
  const bool carries_id = kind != FrameKind::Message && kind != FrameKind::Goodbye;
  if (carries_id != (id != 0)) {
    *why = !carries_id ? fmt::format("a {} frame carrying rendezvous id {}",
                                     kind == FrameKind::Message ? "whole message" : "goodbye", id)
                       : fmt::format("a rendezvous frame (kind {}) without an id", p[39]);
    return false;
  }
  out->envelope.context = get<uint32_t>(p + 4);
  out->envelope.tag = tag;
  out->envelope.kind.op = static_cast<MessageOp>(op);
  out->envelope.kind.dtype = p[37];
  out->envelope.kind.reduce = p[38];
  out->envelope.kind.root = get<int32_t>(p + 32);
  out->envelope.kind.count = get<uint64_t>(p + 24);
  out->payload_bytes = payload;
  out->kind = kind;
  out->rendezvous_id = id;
  return true;
}

}  // namespace thd::detail::tcp
