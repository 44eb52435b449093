#include "datachannel/wire.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <type_traits>

namespace thd::detail {
namespace {

constexpr std::array<uint8_t, 4> kHelloMagic = {'t', 'h', 'd', 'T'};

using le::get;
using le::put;

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
  write_frame_header(b.data(), envelope, payload_bytes, kind, rendezvous_id);
  return b;
}

FrameHeaderBytes encode_rendezvous_frame(FrameKind kind, uint64_t rendezvous_id, uint64_t payload_bytes) {
  return encode_frame_header(Envelope{}, payload_bytes, kind, rendezvous_id);
}

bool decode_frame_header(std::span<const uint8_t, kFrameHeaderBytes> bytes, FrameHeader* out, std::string* why) {
  if (read_frame_header(bytes.data(), out)) return true;
  // Refused: find the reason, in the order read_frame_header checks.
  const uint8_t* p = bytes.data();
  const auto tag = get<int64_t>(p + 8);
  const auto payload = get<uint64_t>(p + 16);
  const uint8_t op = p[36];
  const auto id = get<uint64_t>(p + 40);
  if (std::memcmp(p, kFrameMagic.data(), 4) != 0) {
    *why = fmt::format("bad frame magic {} (the stream is out of step or not from thd)", hex4(p));
  } else if (op > static_cast<uint8_t>(kLastMessageOp)) {
    *why = fmt::format("unknown message op code {}", op);
  } else if (tag < 0) {
    *why = fmt::format("negative tag {}", tag);
  } else if (payload > kMaxPayloadBytes) {
    *why = fmt::format("a payload of {} bytes (the limit is {} bytes)", payload, kMaxPayloadBytes);
  } else if (p[39] > static_cast<uint8_t>(FrameKind::Goodbye)) {
    *why = fmt::format("unknown frame kind {}", p[39]);
  } else if (const auto kind = static_cast<FrameKind>(p[39]);
             (kind == FrameKind::ClearToSend || kind == FrameKind::Decline || kind == FrameKind::Revoke ||
              kind == FrameKind::Goodbye) &&
             payload != 0) {
    *why = fmt::format("a rendezvous control frame (kind {}) with a payload of {} bytes", p[39], payload);
  } else if (kind == FrameKind::Message || kind == FrameKind::Goodbye) {
    *why = fmt::format("a {} frame carrying rendezvous id {}", kind == FrameKind::Message ? "whole message" : "goodbye",
                       id);
  } else {
    *why = fmt::format("a rendezvous frame (kind {}) without an id", p[39]);
  }
  return false;
}

}  // namespace thd::detail
