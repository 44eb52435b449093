// Fuzz target store_server: a real TCPStore server (datachannel/store/
// tcp_store_server.h, its epoll loop on its own thread, on loopback) fed arbitrary
// request bytes by up to three clients at once. Each client either runs the real
// auth handshake first or sends raw bytes from its first byte on; its bytes are
// written, its side is shut, and everything the server sends back is read.
//
//   input := (flags[1] length[2, LE] bytes[length])*     one per client, at most 3
//            flags bit 0: run the auth handshake first
//
// What must hold: the server answers each authenticated client's well-formed
// requests in order with replies that decode for those requests' commands, and
// closes every connection once its client has shut its side (a parked get or wait
// included) — never a hang; it serves a new client afterwards (its loop never
// dies); and it never crashes, leaks or reads out of bounds on the way.
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <thd/error.h>

#include <fmt/format.h>

#include "byte_reader.h"
#include "datachannel/net/auth.h"
#include "datachannel/net/socket.h"
#include "datachannel/store/tcp_store_server.h"
#include "datachannel/store/tcp_store_wire.h"
#include "fuzz_target.h"

namespace {

using namespace thd;
namespace wire = detail::store_wire;
using std::chrono::milliseconds;

constexpr const char* kToken = "fuzz-token-7d1e";
// Generous (a loaded CI machine): a server that neither answers nor closes within
// it is a finding.
constexpr milliseconds kPatience{30000};
// The server's own deadline for a client to finish the handshake: far below the
// patience, so a raw client is always closed in time by one means or the other.
constexpr milliseconds kHandshakeTimeout{5000};

struct Client {
  net::Socket socket;
  bool authenticated = false;
  std::vector<uint8_t> bytes;
};

// The commands of the requests the server will answer, in order: every whole
// well-formed request up to the first one that is not (which drops the connection).
std::vector<wire::Command> answered_commands(const std::vector<uint8_t>& bytes) {
  std::vector<wire::Command> out;
  size_t at = 0;
  while (bytes.size() - at >= wire::kLengthBytes) {
    const uint32_t length = wire::decode_length(bytes.data() + at);
    if (length == 0 || length > wire::kMaxMessageBytes || bytes.size() - at - wire::kLengthBytes < length) break;
    wire::Request request;
    std::string why;
    if (!wire::decode_request({bytes.data() + at + wire::kLengthBytes, length}, &request, &why)) break;
    out.push_back(request.command);
    at += wire::kLengthBytes + length;
  }
  return out;
}

struct Received {
  std::vector<uint8_t> bytes;
  // The server reset the connection (it closed with our bytes unread): what was in
  // flight may be lost, so the last reply may be cut short.
  bool reset = false;
};

// Everything the server sends until it closes the connection. `who` names the
// client in the finding when the server does not close it.
Received read_until_closed(net::Socket& s, const std::string& who) {
  Received out;
  const net::Deadline deadline = net::deadline_after(kPatience);
  uint8_t buf[4096];
  for (;;) {
    net::IoResult r = s.recv_some(buf);
    if (r.status == net::IoResult::Status::Ok) {
      out.bytes.insert(out.bytes.end(), buf, buf + r.bytes);
      continue;
    }
    out.reset = r.status == net::IoResult::Status::Error;
    if (r.status != net::IoResult::Status::WouldBlock) return out;
    pollfd p{s.fd(), POLLIN, 0};
    const int ready = ::poll(&p, 1, net::poll_timeout_ms(deadline));
    // libFuzzer's -timeout alarm (SIGALRM) interrupts this wait: not the server's
    // doing, so the wait goes on with the time left.
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0 && net::Clock::now() >= deadline) {
      fuzz::invariant_failed("the server neither answered nor closed a connection its client had shut",
                             (who + fmt::format(", {} bytes received", out.bytes.size())).c_str(), __FILE__,
                             __LINE__);
    }
  }
}

void check_replies(const Received& got, const std::vector<wire::Command>& commands) {
  const std::vector<uint8_t>& received = got.bytes;
  size_t at = 0;
  size_t i = 0;
  while (at < received.size()) {
    const bool whole = received.size() - at >= wire::kLengthBytes &&
                       received.size() - at - wire::kLengthBytes >= wire::decode_length(received.data() + at);
    if (!whole && got.reset) return;
    THD_FUZZ_CHECK(whole, "the server sent a truncated reply");
    const uint32_t length = wire::decode_length(received.data() + at);
    THD_FUZZ_CHECK(length > 0, "the server sent an empty reply");
    THD_FUZZ_CHECK(i < commands.size(), "the server sent more replies than it was sent requests");
    wire::Reply reply;
    std::string why;
    THD_FUZZ_CHECK(wire::decode_reply(commands[i], {received.data() + at + wire::kLengthBytes, length}, &reply, &why),
                   "the server sent a reply that does not decode for its request");
    at += wire::kLengthBytes + length;
    ++i;
  }
}

void run(fuzz::ByteReader& in) {
  const net::AuthToken token(kToken, "fuzz");
  detail::TCPStoreServer server("127.0.0.1", 0, token, kHandshakeTimeout);
  const net::Deadline deadline = net::deadline_after(kPatience);
  std::vector<Client> clients;
  while (!in.empty() && clients.size() < 3) {
    Client c;
    c.authenticated = (in.u8() & 1) != 0;
    auto bytes = in.take(in.u16());
    c.bytes.assign(bytes.begin(), bytes.end());
    c.socket = net::Socket::connect("127.0.0.1", server.port(), deadline, "fuzz");
    if (c.authenticated) net::client_handshake(c.socket, token, deadline, "fuzz");
    clients.push_back(std::move(c));
  }
  for (Client& c : clients) {
    try {
      // Small enough for the socket buffers: a server that stops reading (a parked
      // request) cannot block this write.
      if (!c.bytes.empty()) c.socket.send_all(c.bytes, deadline, "fuzz");
    } catch (const PeerLost&) {
      // The server dropped a client that sent what it refuses: its right.
    }
    ::shutdown(c.socket.fd(), SHUT_WR);
  }
  for (size_t i = 0; i < clients.size(); ++i) {
    Client& c = clients[i];
    const Received received = read_until_closed(
        c.socket, fmt::format("client {} of {} ({}, {} bytes sent)", i, clients.size(),
                              c.authenticated ? "authenticated" : "raw", c.bytes.size()));
    if (c.authenticated) check_replies(received, answered_commands(c.bytes));
  }
  // Still serving: a well-behaved client gets its answer.
  net::Socket probe = net::Socket::connect("127.0.0.1", server.port(), deadline, "fuzz");
  net::client_handshake(probe, token, deadline, "fuzz");
  wire::Request num_keys;
  num_keys.command = wire::Command::NumKeys;
  probe.send_all(wire::encode_request(num_keys), deadline, "fuzz");
  uint8_t prefix[wire::kLengthBytes];
  probe.recv_exact(prefix, deadline, "fuzz");
  std::vector<uint8_t> body(wire::decode_length(prefix));
  probe.recv_exact(body, deadline, "fuzz");
  wire::Reply reply;
  std::string why;
  THD_FUZZ_CHECK(wire::decode_reply(wire::Command::NumKeys, body, &reply, &why) && reply.status == wire::Status::Ok,
                 "the server no longer answers a well-formed request");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::ByteReader in({data, size});
  // A thd::Error escaping is a finding too: what the clients do themselves (connect,
  // the handshake, the probe) succeeds against a server that works.
  run(in);
  return 0;
}
