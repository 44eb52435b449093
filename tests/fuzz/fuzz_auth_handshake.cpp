// Fuzz target auth_handshake: the connection handshake every Store and tcp backend
// connection runs before any other byte is read (datachannel/net/auth.h), fed
// arbitrary bytes from the other side:
//   mode 0  the server's state machine (the TCPStore's event loop drives it), the
//           ClientHello arriving in pieces of input-chosen sizes;
//   mode 1  the same with a ClientHello the harness proves correctly (the nonce and
//           a flip mask of the proof from the input), so the accepting path runs;
//   mode 2  the blocking client against a server whose bytes are the input;
//   mode 3  the blocking server against a client whose bytes are the input.
//
// What must hold: nothing is accepted without a proof made with the token (an
// input cannot forge one), a correct proof is always accepted, the server's reply
// is the ServerFinish the header describes, and the blocking forms end with a
// thd::Error (never another exception, never a hang: the peer's bytes are all
// written and its side shut before the handshake starts).
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include <thd/error.h>

#include "byte_reader.h"
#include "datachannel/net/auth.h"
#include "fuzz_target.h"

namespace {

using namespace thd::net;

const AuthToken& token() {
  static const AuthToken t("fuzz-token-7d1e", "fuzz");  // read-only: nothing leaks between inputs
  return t;
}

void state_machine(thd::fuzz::ByteReader& in) {
  ServerHandshake hs(token());
  THD_FUZZ_CHECK(hs.hello().size() == kServerHelloBytes, "the ServerHello has the wrong size");
  while (!hs.input_complete() && !in.empty()) {
    const size_t piece = 1 + in.u8() % 80;
    auto bytes = in.take(std::min(piece, hs.input().size()));
    std::memcpy(hs.input().data(), bytes.data(), bytes.size());
    hs.received(bytes.size());
  }
  const ServerHandshake::Verdict v = hs.verify();
  THD_FUZZ_CHECK(!v.accepted, "the server accepted a ClientHello nobody proved with the token");
  if (!hs.input_complete()) {
    THD_FUZZ_CHECK(v.reply.empty(), "an incomplete handshake got a reply");
    return;
  }
  if (!v.reply.empty()) {
    THD_FUZZ_CHECK(v.reply.size() == kServerFinishBytes, "a refusal is not a ServerFinish");
    THD_FUZZ_CHECK(v.reply[0] == static_cast<uint8_t>(HandshakeStatus::BadProof) ||
                       v.reply[0] == static_cast<uint8_t>(HandshakeStatus::BadVersion),
                   "a refusal carries a status that is no refusal");
  }
}

void proved(thd::fuzz::ByteReader& in) {
  ServerHandshake hs(token());
  Nonce server_nonce;
  std::memcpy(server_nonce.data(), hs.hello().data() + 8, kNonceBytes);
  const uint8_t flags = in.u8();
  Nonce client_nonce{};
  auto nonce = in.take(kNonceBytes);
  std::copy(nonce.begin(), nonce.end(), client_nonce.begin());
  Mac proof = client_proof(token(), server_nonce, client_nonce);
  bool flipped = false;
  for (uint8_t& b : proof) {
    const uint8_t mask = (flags & 1) != 0 ? in.u8() : 0;
    b ^= mask;
    flipped = flipped || mask != 0;
  }
  std::span<uint8_t> hello = hs.input();
  std::memcpy(hello.data(), kHandshakeMagic.data(), 4);
  const uint32_t version = (flags & 2) != 0 ? in.u32() : kHandshakeVersion;
  for (int i = 0; i < 4; ++i) hello[4 + static_cast<size_t>(i)] = static_cast<uint8_t>(version >> (8 * i));
  if ((flags & 4) != 0) hello[static_cast<size_t>(in.u8() % 4)] ^= static_cast<uint8_t>(1 + in.u8() % 255);
  std::memcpy(hello.data() + 8, client_nonce.data(), kNonceBytes);
  std::memcpy(hello.data() + 8 + kNonceBytes, proof.data(), kMacBytes);
  hs.received(kClientHelloBytes);

  const bool magic_ok = std::equal(kHandshakeMagic.begin(), kHandshakeMagic.end(), hello.begin());
  const ServerHandshake::Verdict v = hs.verify();
  const bool should_accept = magic_ok && version == kHandshakeVersion && !flipped;
  THD_FUZZ_CHECK(v.accepted == should_accept, "a ClientHello was judged against its proof wrongly");
  THD_FUZZ_CHECK(v.reply.empty() == !magic_ok, "a ClientHello with the magic got no ServerFinish, or one without it did");
  if (v.accepted) {
    const Mac expected = server_proof(token(), client_nonce, server_nonce);
    THD_FUZZ_CHECK(v.reply[0] == static_cast<uint8_t>(HandshakeStatus::Ok) &&
                       std::equal(expected.begin(), expected.end(), v.reply.begin() + 1),
                   "an accepted client got a ServerFinish without the server's proof");
  }
}

// One end of a connected pair for the handshake, the other holding `peer_bytes`
// already sent and then shut: the handshake reads only what is there.
void over_socketpair(thd::fuzz::ByteReader& in, bool client) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) return;
  Socket mine(UniqueFd(fds[0]), "fuzz-peer");
  Socket peer(UniqueFd(fds[1]), "fuzz-self");
  auto bytes = in.take(4096);  // within the socket buffer: the write never blocks
  if (!bytes.empty() && peer.send_some(bytes).status != IoResult::Status::Ok) return;
  ::shutdown(peer.fd(), SHUT_WR);
  const Deadline deadline = deadline_after(std::chrono::milliseconds(1000));
  try {
    if (client) {
      client_handshake(mine, token(), deadline, "fuzz");
      thd::fuzz::invariant_failed("the client accepted a server that never proved the token", "", __FILE__,
                                  __LINE__);
    }
    server_handshake(mine, token(), deadline, "fuzz");
    thd::fuzz::invariant_failed("the server accepted a client that never proved the token", "", __FILE__, __LINE__);
  } catch (const thd::Error&) {
    // Refused, or the peer hung up mid-handshake: the answers bad bytes get.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  thd::fuzz::ByteReader in({data, size});
  switch (in.u8() % 4) {
    case 0: state_machine(in); break;
    case 1: proved(in); break;
    case 2: over_socketpair(in, /*client=*/true); break;
    case 3: over_socketpair(in, /*client=*/false); break;
  }
  return 0;
}
