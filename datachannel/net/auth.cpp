#include "datachannel/net/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <system_error>
#include <thread>

#include "datachannel/check.h"
#include "tensor/log.h"

namespace thd::net {
namespace {

constexpr std::string_view kClientLabel = "thd-client";
constexpr std::string_view kServerLabel = "thd-server";
// A token is a short secret; anything larger is not a token file.
constexpr size_t kMaxTokenFileBytes = 4096;

std::string openssl_error() {
  unsigned long code = ERR_get_error();
  if (code == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

struct EvpMacDeleter {
  void operator()(EVP_MAC* m) const noexcept { EVP_MAC_free(m); }
};
struct EvpMacCtxDeleter {
  void operator()(EVP_MAC_CTX* c) const noexcept { EVP_MAC_CTX_free(c); }
};

// HMAC-SHA256(token, label | a | b), through the OpenSSL 3 EVP_MAC interface (the
// HMAC_CTX one is deprecated).
Mac hmac(const AuthToken& token, std::string_view label, const Nonce& a, const Nonce& b) {
  std::unique_ptr<EVP_MAC, EvpMacDeleter> mac(EVP_MAC_fetch(nullptr, OSSL_MAC_NAME_HMAC, nullptr));
  THD_CHECK(mac != nullptr, AuthError, "auth.hmac", "OpenSSL has no HMAC: {}", openssl_error());
  std::unique_ptr<EVP_MAC_CTX, EvpMacCtxDeleter> ctx(EVP_MAC_CTX_new(mac.get()));
  THD_CHECK(ctx != nullptr, AuthError, "auth.hmac", "EVP_MAC_CTX_new failed: {}", openssl_error());
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  const auto key = token.bytes();
  Mac out{};
  size_t out_len = 0;
  bool ok = EVP_MAC_init(ctx.get(), key.data(), key.size(), params) == 1 &&
            EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(label.data()), label.size()) == 1 &&
            EVP_MAC_update(ctx.get(), a.data(), a.size()) == 1 &&
            EVP_MAC_update(ctx.get(), b.data(), b.size()) == 1 &&
            EVP_MAC_final(ctx.get(), out.data(), &out_len, out.size()) == 1;
  THD_CHECK(ok && out_len == out.size(), AuthError, "auth.hmac", "HMAC-SHA256 failed: {}", openssl_error());
  return out;
}

bool macs_equal(const uint8_t* a, const Mac& b) {
  // Constant time, so the position of the first wrong byte cannot be measured.
  return CRYPTO_memcmp(a, b.data(), b.size()) == 0;
}

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{p[i]} << (8 * i);
  return v;
}

bool magic_matches(const uint8_t* p) {
  return std::memcmp(p, kHandshakeMagic.data(), kHandshakeMagic.size()) == 0;
}

}  // namespace

AuthToken::AuthToken(std::string_view secret, std::string source)
    : secret_(secret.begin(), secret.end()), source_(std::move(source)) {
  THD_CHECK(!secret_.empty(), AuthError, "auth", "the auth token from {} is empty", source_);
}

AuthToken::~AuthToken() {
  if (!secret_.empty()) OPENSSL_cleanse(secret_.data(), secret_.size());
}

void wipe(std::string& s) noexcept {
  if (!s.empty()) OPENSSL_cleanse(s.data(), s.size());
}

std::optional<std::string> process_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

AuthToken resolve_auth_token(const std::optional<std::string>& explicit_token, std::string_view op,
                             const EnvLookup& env) {
  if (explicit_token) return AuthToken(*explicit_token, "the options");
  if (auto v = env("THD_AUTH_TOKEN")) {
    THD_CHECK(!v->empty(), AuthError, std::string(op),
              "THD_AUTH_TOKEN is set but empty; unset it or give it the job's shared token");
    return AuthToken(*v, "THD_AUTH_TOKEN");
  }
  if (auto path = env("THD_AUTH_TOKEN_FILE")) {
    THD_CHECK(!path->empty(), AuthError, std::string(op), "THD_AUTH_TOKEN_FILE is set but empty");
    return read_auth_token_file(*path, op);
  }
  THD_THROW(AuthError, std::string(op),
            "no auth token: every connection must prove the job's shared secret. Launch with thdrun "
            "(it sets one), or export THD_AUTH_TOKEN=<secret> (the same in every process), or "
            "THD_AUTH_TOKEN_FILE=<path of a mode-0600 file holding it>");
}

AuthToken read_auth_token_file(const std::string& path, std::string_view op) {
  // O_NONBLOCK so that a FIFO planted at the path cannot block the open; it is then
  // refused as not a regular file. The checks run on the opened fd (fstat), not on
  // the path, so the file cannot be swapped between the check and the read.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) {
    int err = errno;
    THD_THROW(AuthError, std::string(op), "cannot open the token file '{}' (THD_AUTH_TOKEN_FILE): {}", path,
              std::system_category().message(err));
  }
  struct stat st {};
  THD_CHECK(::fstat(fd.get(), &st) == 0, AuthError, std::string(op), "cannot stat the token file '{}': {}",
            path, std::system_category().message(errno));
  THD_CHECK(S_ISREG(st.st_mode), AuthError, std::string(op), "the token file '{}' is not a regular file", path);
  THD_CHECK(st.st_uid == ::geteuid(), AuthError, std::string(op),
            "the token file '{}' is owned by uid {}, not by this user (uid {}); refusing a secret "
            "someone else controls",
            path, st.st_uid, ::geteuid());
  THD_CHECK((st.st_mode & 077) == 0, AuthError, std::string(op),
            "the token file '{}' has mode {:04o}: other users can read it. It must be readable by "
            "its owner only (chmod 600 '{}')",
            path, st.st_mode & 07777, path);
  THD_CHECK(st.st_size <= static_cast<off_t>(kMaxTokenFileBytes), AuthError, std::string(op),
            "the token file '{}' is {} bytes; a token file holds one token (at most {} bytes)", path,
            st.st_size, kMaxTokenFileBytes);

  std::string content(kMaxTokenFileBytes + 1, '\0');
  size_t n = 0;
  while (n < content.size()) {
    ssize_t r = ::read(fd.get(), content.data() + n, content.size() - n);
    if (r == 0) break;
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      OPENSSL_cleanse(content.data(), content.size());
      THD_THROW(AuthError, std::string(op), "cannot read the token file '{}': {}", path,
                std::system_category().message(err));
    }
    n += static_cast<size_t>(r);
  }
  while (n > 0 && std::strchr(" \t\r\n", content[n - 1]) != nullptr) --n;
  const bool too_big = n > kMaxTokenFileBytes;
  const bool empty = n == 0;
  std::optional<AuthToken> token;
  if (!too_big && !empty) token.emplace(std::string_view(content.data(), n), "file " + path);
  OPENSSL_cleanse(content.data(), content.size());
  THD_CHECK(!too_big, AuthError, std::string(op), "the token file '{}' grew past {} bytes while being read",
            path, kMaxTokenFileBytes);
  THD_CHECK(!empty, AuthError, std::string(op), "the token file '{}' is empty", path);
  return std::move(*token);
}

Nonce random_nonce() {
  Nonce n{};
  THD_CHECK(RAND_bytes(n.data(), static_cast<int>(n.size())) == 1, AuthError, "auth",
            "cannot draw a handshake nonce: RAND_bytes failed: {}", openssl_error());
  return n;
}

Mac client_proof(const AuthToken& token, const Nonce& server_nonce, const Nonce& client_nonce) {
  return hmac(token, kClientLabel, server_nonce, client_nonce);
}

Mac server_proof(const AuthToken& token, const Nonce& client_nonce, const Nonce& server_nonce) {
  return hmac(token, kServerLabel, client_nonce, server_nonce);
}

void client_handshake(Socket& socket, const AuthToken& token, Deadline deadline, std::string_view op) {
  std::array<uint8_t, kServerHelloBytes> hello{};
  socket.recv_exact(hello, deadline, op);
  THD_CHECK(magic_matches(hello.data()), ConnectionError, std::string(op),
            "{} is not a thd server: its greeting does not start with the thd handshake magic "
            "(wrong port?)",
            socket.peer());
  const uint32_t version = get_u32(hello.data() + 4);
  THD_CHECK(version == kHandshakeVersion, ConnectionError, std::string(op),
            "{} speaks thd handshake version {}, this process speaks version {}: are both built "
            "from the same thd?",
            socket.peer(), version, kHandshakeVersion);
  Nonce server_nonce;
  std::memcpy(server_nonce.data(), hello.data() + 8, kNonceBytes);

  const Nonce client_nonce = random_nonce();
  std::array<uint8_t, kClientHelloBytes> reply{};
  std::memcpy(reply.data(), kHandshakeMagic.data(), 4);
  put_u32(reply.data() + 4, kHandshakeVersion);
  std::memcpy(reply.data() + 8, client_nonce.data(), kNonceBytes);
  const Mac proof = client_proof(token, server_nonce, client_nonce);
  std::memcpy(reply.data() + 8 + kNonceBytes, proof.data(), kMacBytes);
  socket.send_all(reply, deadline, op);

  std::array<uint8_t, kServerFinishBytes> finish{};
  socket.recv_exact(finish, deadline, op);
  switch (static_cast<HandshakeStatus>(finish[0])) {
    case HandshakeStatus::Ok:
      break;
    case HandshakeStatus::BadProof:
      THD_THROW(AuthError, std::string(op),
                "{} refused this process's auth token (from {}): the processes of one job must "
                "share the same THD_AUTH_TOKEN",
                socket.peer(), token.source());
    case HandshakeStatus::BadVersion:
      THD_THROW(ConnectionError, std::string(op),
                "{} does not speak thd handshake version {}: are both built from the same thd?",
                socket.peer(), kHandshakeVersion);
    default:
      THD_THROW(ConnectionError, std::string(op), "{} answered the handshake with unknown status {}",
                socket.peer(), finish[0]);
  }
  THD_CHECK(macs_equal(finish.data() + 1, server_proof(token, client_nonce, server_nonce)), AuthError,
            std::string(op),
            "{} failed to prove it holds this job's auth token (from {}): it is not the server "
            "this process expects",
            socket.peer(), token.source());
}

Socket connect_authenticated(const std::string& host, uint16_t port, const AuthToken& token, Deadline deadline,
                             std::string_view op) {
  std::chrono::milliseconds backoff{1};
  for (;;) {
    Socket s = Socket::connect(host, port, deadline, op);
    try {
      client_handshake(s, token, deadline, op);
      return s;
    } catch (const PeerLost& e) {
      const auto now = Clock::now();
      if (now + backoff >= deadline) throw;
      THD_LOG_DEBUG("{}: {} closed the connection during the auth handshake ({}); connecting again", op,
                    s.peer(), e.message());
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds{100});
  }
}

ServerHandshake::ServerHandshake(const AuthToken& token) : token_(&token), server_nonce_(random_nonce()) {
  std::memcpy(hello_.data(), kHandshakeMagic.data(), 4);
  put_u32(hello_.data() + 4, kHandshakeVersion);
  std::memcpy(hello_.data() + 8, server_nonce_.data(), kNonceBytes);
}

ServerHandshake::Verdict ServerHandshake::verify() const {
  Verdict v;
  if (!input_complete()) {
    v.reason = "incomplete handshake";
    return v;
  }
  const uint8_t* p = client_hello_.data();
  if (!magic_matches(p)) {
    v.reason = "not a thd client (bad handshake magic)";
    return v;
  }
  auto reject = [&](HandshakeStatus status, std::string reason) {
    v.reason = std::move(reason);
    v.reply.assign(kServerFinishBytes, 0);
    v.reply[0] = static_cast<uint8_t>(status);
    return v;
  };
  const uint32_t version = get_u32(p + 4);
  if (version != kHandshakeVersion) {
    return reject(HandshakeStatus::BadVersion,
                  fmt::format("handshake version {}, this server speaks {}", version, kHandshakeVersion));
  }
  Nonce client_nonce;
  std::memcpy(client_nonce.data(), p + 8, kNonceBytes);
  if (!macs_equal(p + 8 + kNonceBytes, client_proof(*token_, server_nonce_, client_nonce))) {
    return reject(HandshakeStatus::BadProof, "wrong auth token (the client's proof did not verify)");
  }
  v.accepted = true;
  v.reply.resize(kServerFinishBytes);
  v.reply[0] = static_cast<uint8_t>(HandshakeStatus::Ok);
  const Mac proof = server_proof(*token_, client_nonce, server_nonce_);
  std::memcpy(v.reply.data() + 1, proof.data(), kMacBytes);
  return v;
}

void server_handshake(Socket& socket, const AuthToken& token, Deadline deadline, std::string_view op) {
  ServerHandshake hs(token);
  ServerHandshake::Verdict v;
  try {
    socket.send_all(hs.hello(), deadline, op);
    socket.recv_exact(hs.input(), deadline, op);
    hs.received(kClientHelloBytes);
    v = hs.verify();
    if (v.accepted) {
      socket.send_all(v.reply, deadline, op);
      return;
    }
  } catch (const Error& e) {
    THD_LOG_WARN("{}: handshake with {} failed: {}", op, socket.peer(), e.message());
    throw;
  }
  THD_LOG_WARN("{}: refused the connection from {}: {}", op, socket.peer(), v.reason);
  if (!v.reply.empty()) {
    try {
      socket.send_all(v.reply, deadline, op);
    } catch (const Error&) {
      // The refused peer left before hearing why; it is refused all the same.
    }
  }
  THD_THROW(AuthError, std::string(op), "refused the connection from {}: {}", socket.peer(), v.reason);
}

}  // namespace thd::net
