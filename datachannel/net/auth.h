// The shared secret and the handshake every Store and DataChannel connection runs
// before any other byte is read.
//
// Mutual HMAC-SHA256 challenge-response; the token never crosses the wire. All
// messages are fixed-size, so a server reads exactly what it expects and nothing a
// peer sends can make it allocate or wait longer than its handshake deadline:
//
//   server -> client  ServerHello   magic[4] version[4, LE] server_nonce[32]            40 B
//   client -> server  ClientHello   magic[4] version[4, LE] client_nonce[32]
//                                   HMAC(token, "thd-client" | server_nonce | client_nonce)  72 B
//   server -> client  ServerFinish  status[1]
//                                   HMAC(token, "thd-server" | client_nonce | server_nonce)  33 B
//
// The server's fresh nonce makes a recorded ClientHello useless on a new
// connection; the client's nonce does the same for a recorded ServerFinish; the
// distinct labels stop a peer from reflecting one side's proof back as the other's.
// On a rejected ClientHello (wrong version or proof) the server sends a
// ServerFinish with a nonzero status and no proof, so the client can say why, and
// closes; on a wrong magic it closes without a word.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "datachannel/net/socket.h"

namespace thd::net {

inline constexpr std::array<uint8_t, 4> kHandshakeMagic = {'t', 'h', 'd', 'H'};
inline constexpr uint32_t kHandshakeVersion = 1;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline constexpr size_t kServerHelloBytes = 4 + 4 + kNonceBytes;
inline constexpr size_t kClientHelloBytes = 4 + 4 + kNonceBytes + kMacBytes;
inline constexpr size_t kServerFinishBytes = 1 + kMacBytes;
// How long a server gives a fresh connection to complete the handshake.
inline constexpr std::chrono::milliseconds kDefaultHandshakeTimeout{5000};

using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

// ServerFinish status byte.
enum class HandshakeStatus : uint8_t {
  Ok = 0,
  BadProof = 1,    // the client's HMAC did not verify: its token differs
  BadVersion = 2,  // the client speaks another handshake version
};

// The shared secret. Its bytes are wiped when it is destroyed and it has no way to
// be printed: error messages say where a token came from, never what it is.
class AuthToken {
 public:
  // Throws AuthError for an empty secret.
  AuthToken(std::string_view secret, std::string source);
  ~AuthToken();
  AuthToken(const AuthToken&) = default;
  AuthToken& operator=(const AuthToken&) = default;
  AuthToken(AuthToken&&) noexcept = default;
  AuthToken& operator=(AuthToken&&) noexcept = default;

  std::span<const uint8_t> bytes() const noexcept { return secret_; }
  // Where it came from, for messages: "options", "THD_AUTH_TOKEN", "file /run/x".
  const std::string& source() const noexcept { return source_; }

 private:
  std::vector<uint8_t> secret_;
  std::string source_;
};

// Overwrites a string that held a secret (the compiler may not optimize it away).
void wipe(std::string& s) noexcept;

// Reads an environment variable; nullopt when unset. Injected so tests can supply
// an environment without setenv() on the test process.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
std::optional<std::string> process_env(const char* name);

// The token, from the first of: `explicit_token`; $THD_AUTH_TOKEN; the file named
// by $THD_AUTH_TOKEN_FILE (see read_auth_token_file). Nothing anywhere, or an
// empty value, is an AuthError that says how to provide one. `op` names the caller
// in errors.
AuthToken resolve_auth_token(const std::optional<std::string>& explicit_token, std::string_view op,
                             const EnvLookup& env = process_env);

// A token file must be a regular file owned by this user with no permission bits
// for group or others (mode 0600 or stricter): anything else is refused with an
// AuthError saying which rule failed. Trailing whitespace (the newline of `echo
// $TOKEN > file`) is not part of the token.
AuthToken read_auth_token_file(const std::string& path, std::string_view op);

Nonce random_nonce();
// The two proofs. Exposed for tests that speak the handshake by hand.
Mac client_proof(const AuthToken& token, const Nonce& server_nonce, const Nonce& client_nonce);
Mac server_proof(const AuthToken& token, const Nonce& client_nonce, const Nonce& server_nonce);

// Client side, blocking: reads the ServerHello, proves the token, checks the
// server's proof. Throws AuthError when either side's proof fails, ConnectionError
// when the peer is not a thd server or speaks another version, and the socket
// errors (TimeoutError, PeerLost) past `deadline` or on a dropped connection.
void client_handshake(Socket& socket, const AuthToken& token, Deadline deadline, std::string_view op);

// Socket::connect, then client_handshake. A connection the server closes before the
// handshake is over (PeerLost: a listener under a flood of silent connections
// evicts its oldest pending ones, datachannel/net/handshake_admission.h) is made
// again, with backoff, until `deadline`; every other failure is thrown as is.
Socket connect_authenticated(const std::string& host, uint16_t port, const AuthToken& token, Deadline deadline,
                             std::string_view op);

// Server side as a state machine, for event loops that must not block on one
// connection while others wait (the TCPStore server). Usage: send hello(); read
// into input() until input_complete(); call verify() once; send its reply (if any).
class ServerHandshake {
 public:
  // `token` must outlive this object.
  explicit ServerHandshake(const AuthToken& token);

  std::span<const uint8_t> hello() const noexcept { return hello_; }

  // The part of the ClientHello not yet received: read at most this many bytes,
  // so the handshake never consumes anything the client sends after it.
  std::span<uint8_t> input() noexcept { return std::span(client_hello_).subspan(received_); }
  void received(size_t n) noexcept { received_ += n; }
  bool input_complete() const noexcept { return received_ == kClientHelloBytes; }

  struct Verdict {
    bool accepted = false;
    std::string reason;                  // why not, for the server's log
    std::vector<uint8_t> reply;          // the ServerFinish to send, empty for none
  };
  Verdict verify() const;

 private:
  const AuthToken* token_;
  Nonce server_nonce_;
  std::array<uint8_t, kServerHelloBytes> hello_{};
  std::array<uint8_t, kClientHelloBytes> client_hello_{};
  size_t received_ = 0;
};

// Server side, blocking (for backends that accept one connection at a time). A
// refused client is sent the reason, logged (THD_LOG_WARN, with its address), and
// reported as AuthError; a peer that times out or hangs up mid-handshake is logged
// and reported with the socket error.
void server_handshake(Socket& socket, const AuthToken& token, Deadline deadline, std::string_view op);

}  // namespace thd::net
