// Fuzz target tcp_wire: the tcp backend's decoders of what a peer sends after the
// auth handshake (datachannel/wire.h), fed the input as that stream is read:
//
//   input := hello[32] frame_header[48]*   (a trailing partial header is ignored)
//
// What must hold: a decoder never reads past its fixed-size input and answers
// every byte pattern with true or false (and a reason); and what it accepts is
// exactly what the encoder writes for the decoded fields (every byte of both
// formats is a field, so decode then encode gives the input back), so the two
// cannot drift apart.
#include <algorithm>
#include <cstring>
#include <span>
#include <string>

#include "datachannel/wire.h"
#include "fuzz_target.h"

namespace {

using namespace thd::detail;

void hello(std::span<const uint8_t, kHelloBytes> bytes) {
  Hello decoded;
  std::string why;
  if (!decode_hello(bytes, &decoded, &why)) {
    THD_FUZZ_CHECK(!why.empty(), "a refused hello gives no reason");
    return;
  }
  const HelloBytes again = encode_hello(decoded);
  THD_FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin()), "an accepted hello does not re-encode as sent");
}

void frame_header(std::span<const uint8_t, kFrameHeaderBytes> bytes) {
  FrameHeader decoded;
  std::string why;
  if (!decode_frame_header(bytes, &decoded, &why)) {
    THD_FUZZ_CHECK(!why.empty(), "a refused frame header gives no reason");
    return;
  }
  THD_FUZZ_CHECK(decoded.envelope.tag >= 0, "an accepted frame header has a negative tag");
  THD_FUZZ_CHECK(decoded.payload_bytes <= kMaxPayloadBytes, "an accepted frame header claims an implausible payload");
  const FrameHeaderBytes again =
      encode_frame_header(decoded.envelope, decoded.payload_bytes, decoded.kind, decoded.rendezvous_id);
  THD_FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin()),
                 "an accepted frame header does not re-encode as sent");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Each window is copied out, so a decoder that reads one byte too far trips the
  // sanitizer.
  if (size < kHelloBytes) return 0;
  HelloBytes first;
  std::memcpy(first.data(), data, kHelloBytes);
  hello(first);
  for (size_t at = kHelloBytes; at + kFrameHeaderBytes <= size; at += kFrameHeaderBytes) {
    FrameHeaderBytes window;
    std::memcpy(window.data(), data + at, kFrameHeaderBytes);
    frame_header(window);
  }
  return 0;
}
