// Fuzz target store_wire: the TCPStore's message decoders (datachannel/store/
// tcp_store_wire.h), the server's for requests and the client's for the reply to
// each command, fed the input as one message body.
//
// What must hold: a decoder answers every body with true or false (and a reason),
// never reads outside it, never allocates more than the body could describe (a
// count of keys larger than the body fits is refused before anything is
// reserved); and what it accepts is exactly what the encoder writes for the
// decoded message, length prefix and all, so client and server cannot drift apart.
#include <algorithm>
#include <span>
#include <string>

#include "datachannel/store/tcp_store_wire.h"
#include "fuzz_target.h"

namespace {

namespace wire = thd::detail::store_wire;

void check_frame(const wire::Bytes& frame, std::span<const uint8_t> body, const char* what) {
  THD_FUZZ_CHECK(frame.size() == wire::kLengthBytes + body.size(), what);
  THD_FUZZ_CHECK(wire::decode_length(frame.data()) == body.size(), what);
  THD_FUZZ_CHECK(std::equal(body.begin(), body.end(), frame.begin() + wire::kLengthBytes), what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> body(data, size);
  wire::Request request;
  std::string why;
  if (wire::decode_request(body, &request, &why)) {
    check_frame(wire::encode_request(request), body, "an accepted request does not re-encode as sent");
  } else {
    THD_FUZZ_CHECK(!why.empty(), "a refused request gives no reason");
  }
  for (uint8_t c = 1; c <= static_cast<uint8_t>(wire::Command::Join); ++c) {
    const auto command = static_cast<wire::Command>(c);
    wire::Reply reply;
    why.clear();
    if (wire::decode_reply(command, body, &reply, &why)) {
      check_frame(wire::encode_reply(command, reply), body, "an accepted reply does not re-encode as sent");
    } else {
      THD_FUZZ_CHECK(!why.empty(), "a refused reply gives no reason");
    }
  }
  return 0;
}
