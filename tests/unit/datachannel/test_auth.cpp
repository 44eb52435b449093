#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include "datachannel/net/auth.h"
#include "datachannel/test_util.h"

namespace thd {
namespace {

using namespace std::chrono_literals;
using net::AuthToken;
using net::Socket;
using test::in;

// An environment for resolve_auth_token, instead of setenv() on the test process.
net::EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string write_file(const test::TempDir& dir, const std::string& name, const std::string& content,
                       mode_t mode) {
  const std::string path = dir.file(name);
  std::ofstream(path) << content;
  EXPECT_EQ(::chmod(path.c_str(), mode), 0);
  return path;
}

std::string token_text(const AuthToken& t) { return std::string(t.bytes().begin(), t.bytes().end()); }

// Two connected sockets without TCP: the handshake does not care.
std::pair<Socket, Socket> socket_pair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  return {Socket(net::UniqueFd(fds[0]), "client-end"), Socket(net::UniqueFd(fds[1]), "server-end")};
}

TEST(AuthToken, ExplicitTokenComesFirst) {
  auto env = fake_env({{"THD_AUTH_TOKEN", "from-env"}});
  EXPECT_EQ(token_text(net::resolve_auth_token(std::string("explicit"), "test", env)), "explicit");
  EXPECT_EQ(token_text(net::resolve_auth_token(std::nullopt, "test", env)), "from-env");
}

TEST(AuthToken, EnvironmentTokenBeatsTokenFile) {
  test::TempDir dir;
  const std::string path = write_file(dir, "token", "from-file\n", 0600);
  auto env = fake_env({{"THD_AUTH_TOKEN", "from-env"}, {"THD_AUTH_TOKEN_FILE", path}});
  EXPECT_EQ(token_text(net::resolve_auth_token(std::nullopt, "test", env)), "from-env");
  auto file_only = fake_env({{"THD_AUTH_TOKEN_FILE", path}});
  AuthToken t = net::resolve_auth_token(std::nullopt, "test", file_only);
  EXPECT_EQ(token_text(t), "from-file");  // the newline is not part of it
  EXPECT_EQ(t.source(), "file " + path);
}

TEST(AuthToken, MissingTokenExplainsHowToProvideOne) {
  THD_EXPECT_THROW_MSG(net::resolve_auth_token(std::nullopt, "test.op", fake_env({})), AuthError, "THD_AUTH_TOKEN");
  THD_EXPECT_THROW_MSG(net::resolve_auth_token(std::nullopt, "test.op", fake_env({})), AuthError, "thdrun");
  THD_EXPECT_THROW_MSG(net::resolve_auth_token(std::nullopt, "test.op", fake_env({})), AuthError, "test.op: no auth token");
  THD_EXPECT_THROW_MSG(net::resolve_auth_token(std::nullopt, "test", fake_env({{"THD_AUTH_TOKEN", ""}})), AuthError,
                   "THD_AUTH_TOKEN is set but empty");
  THD_EXPECT_THROW_MSG(net::resolve_auth_token(std::string(), "test", fake_env({})), AuthError, "empty");
}

TEST(AuthToken, FileReadableByOthersIsRefused) {
  test::TempDir dir;
  for (mode_t mode : {0644, 0640, 0604, 0660}) {
    const std::string path = write_file(dir, "token", "secret", mode);
    char expected[32];
    std::snprintf(expected, sizeof(expected), "has mode %04o", static_cast<unsigned>(mode));
    THD_EXPECT_THROW_MSG(net::read_auth_token_file(path, "test"), AuthError, expected);
    THD_EXPECT_THROW_MSG(net::read_auth_token_file(path, "test"), AuthError, "chmod 600");
  }
  const std::string strict = write_file(dir, "strict", "secret", 0400);
  EXPECT_EQ(token_text(net::read_auth_token_file(strict, "test")), "secret");
}

TEST(AuthToken, FileMustBeARegularFileOwnedByThisUser) {
  test::TempDir dir;
  THD_EXPECT_THROW_MSG(net::read_auth_token_file(dir.file("absent"), "test"), AuthError, "cannot open");
  ASSERT_EQ(::mkdir(dir.file("d").c_str(), 0700), 0);
  THD_EXPECT_THROW_MSG(net::read_auth_token_file(dir.file("d"), "test"), AuthError, "not a regular file");
  // A FIFO must be refused, not block the open or the read.
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  THD_EXPECT_THROW_MSG(net::read_auth_token_file(dir.file("fifo"), "test"), AuthError, "not a regular file");
  const std::string empty = write_file(dir, "empty", "\n", 0600);
  THD_EXPECT_THROW_MSG(net::read_auth_token_file(empty, "test"), AuthError, "is empty");
  const std::string big = write_file(dir, "big", std::string(5000, 'x'), 0600);
  THD_EXPECT_THROW_MSG(net::read_auth_token_file(big, "test"), AuthError, "at most 4096 bytes");
  if (::geteuid() == 0) {
    const std::string theirs = write_file(dir, "theirs", "secret", 0600);
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    THD_EXPECT_THROW_MSG(net::read_auth_token_file(theirs, "test"), AuthError, "owned by uid 65534");
  }
}

TEST(AuthToken, ProofsDependOnTokenRoleAndBothNonces) {
  AuthToken a("token-a", "test");
  AuthToken b("token-b", "test");
  const net::Nonce n1 = net::random_nonce();
  const net::Nonce n2 = net::random_nonce();
  EXPECT_NE(n1, n2);
  EXPECT_EQ(net::client_proof(a, n1, n2), net::client_proof(a, n1, n2));
  EXPECT_NE(net::client_proof(a, n1, n2), net::client_proof(b, n1, n2));
  EXPECT_NE(net::client_proof(a, n1, n2), net::client_proof(a, n2, n1));
  // The labels keep one side's proof from passing as the other's.
  EXPECT_NE(net::client_proof(a, n1, n2), net::server_proof(a, n1, n2));
}

TEST(AuthToken, ProofIsHmacSha256OfLabelAndNonces) {
  // A known answer, computed independently of OpenSSL with:
  //   python3 -c "import hmac,hashlib; print(hmac.new(b'key', b'thd-client' + bytes(range(32)) +
  //               bytes(range(32,64)), hashlib.sha256).hexdigest())"
  AuthToken key("key", "test");
  net::Nonce s{}, c{};
  for (int i = 0; i < 32; ++i) {
    s[i] = static_cast<uint8_t>(i);
    c[i] = static_cast<uint8_t>(32 + i);
  }
  const net::Mac mac = net::client_proof(key, s, c);
  std::string hex;
  for (uint8_t b : mac) {
    char two[3];
    std::snprintf(two, sizeof(two), "%02x", b);
    hex += two;
  }
  EXPECT_EQ(hex,
            "abc374811cb1b807197ce74f818428aa4bdc89e574c029d18583553a40b406fa");
}

TEST(Handshake, SameTokenSucceedsBothWays) {
  auto [client, server] = socket_pair();
  AuthToken token("shared", "test");
  std::exception_ptr server_error;
  std::thread srv([&, &server = server] {
    try {
      net::server_handshake(server, token, in(test::kLong), "test.server");
    } catch (...) {
      server_error = std::current_exception();
    }
  });
  EXPECT_NO_THROW(net::client_handshake(client, token, in(test::kLong), "test.client"));
  srv.join();
  EXPECT_FALSE(server_error);
}

TEST(Handshake, WrongTokenFailsOnBothSides) {
  auto [client, server] = socket_pair();
  AuthToken good("shared", "test");
  AuthToken bad("guessed", "a test");
  bool server_refused = false;
  std::thread srv([&, &server = server] {
    try {
      net::server_handshake(server, good, in(test::kLong), "test.server");
    } catch (const AuthError& e) {
      server_refused = std::string(e.what()).find("wrong auth token") != std::string::npos;
    } catch (...) {
    }
  });
  THD_EXPECT_THROW_MSG(net::client_handshake(client, bad, in(test::kLong), "test.client"), AuthError,
                   "refused this process's auth token (from a test)");
  srv.join();
  EXPECT_TRUE(server_refused);
}

TEST(Handshake, ServerStateMachineReadsExactlyTheClientHello) {
  AuthToken token("shared", "test");
  net::ServerHandshake hs(token);
  EXPECT_EQ(hs.hello().size(), net::kServerHelloBytes);
  EXPECT_EQ(hs.input().size(), net::kClientHelloBytes);
  hs.received(10);
  EXPECT_EQ(hs.input().size(), net::kClientHelloBytes - 10);
  EXPECT_FALSE(hs.input_complete());
  EXPECT_FALSE(hs.verify().accepted);
}

TEST(Handshake, ServerRefusesBadMagicSilentlyAndBadVersionWithAReason) {
  AuthToken token("shared", "test");
  {
    net::ServerHandshake hs(token);
    std::memset(hs.input().data(), 'G', net::kClientHelloBytes);
    hs.received(net::kClientHelloBytes);
    auto v = hs.verify();
    EXPECT_FALSE(v.accepted);
    EXPECT_TRUE(v.reply.empty());
    EXPECT_NE(v.reason.find("bad handshake magic"), std::string::npos);
  }
  {
    net::ServerHandshake hs(token);
    auto in_bytes = hs.input();
    std::memcpy(in_bytes.data(), net::kHandshakeMagic.data(), 4);
    in_bytes[4] = 7;  // version 7
    hs.received(net::kClientHelloBytes);
    auto v = hs.verify();
    EXPECT_FALSE(v.accepted);
    ASSERT_EQ(v.reply.size(), net::kServerFinishBytes);
    EXPECT_EQ(v.reply[0], static_cast<uint8_t>(net::HandshakeStatus::BadVersion));
    EXPECT_NE(v.reason.find("version 7"), std::string::npos);
  }
}

// A fake server on the other end of a pair: sends `hello`, reads the client's
// hello, then answers `finish` (computed from both nonces if `prove`).
void fake_server(Socket& s, std::vector<uint8_t> hello, uint8_t status, bool prove, const AuthToken& token) {
  try {
    s.send_all(hello, in(test::kLong), "fake");
    std::vector<uint8_t> ch(net::kClientHelloBytes);
    s.recv_exact(ch, in(test::kLong), "fake");
    std::vector<uint8_t> finish(net::kServerFinishBytes, 0xAB);
    finish[0] = status;
    if (prove) {
      net::Nonce sn, cn;
      std::memcpy(sn.data(), hello.data() + 8, 32);
      std::memcpy(cn.data(), ch.data() + 8, 32);
      auto mac = net::server_proof(token, cn, sn);
      std::memcpy(finish.data() + 1, mac.data(), 32);
    }
    s.send_all(finish, in(test::kLong), "fake");
  } catch (const Error&) {
    // the client hung up first: expected in the failure cases
  }
}

std::vector<uint8_t> server_hello(uint32_t version) {
  std::vector<uint8_t> h(net::kServerHelloBytes, 0x11);
  std::memcpy(h.data(), net::kHandshakeMagic.data(), 4);
  for (int i = 0; i < 4; ++i) h[4 + i] = static_cast<uint8_t>(version >> (8 * i));
  return h;
}

TEST(Handshake, ClientRejectsAServerThatCannotProveTheToken) {
  auto [client, server] = socket_pair();
  AuthToken token("shared", "test");
  std::thread srv([&, &server = server] { fake_server(server, server_hello(1), 0, /*prove=*/false, token); });
  THD_EXPECT_THROW_MSG(net::client_handshake(client, token, in(test::kLong), "test.client"), AuthError,
                   "failed to prove it holds this job's auth token");
  srv.join();
}

TEST(Handshake, ClientAcceptsAServerThatProvesTheToken) {
  auto [client, server] = socket_pair();
  AuthToken token("shared", "test");
  std::thread srv([&, &server = server] { fake_server(server, server_hello(1), 0, /*prove=*/true, token); });
  EXPECT_NO_THROW(net::client_handshake(client, token, in(test::kLong), "test.client"));
  srv.join();
}

TEST(Handshake, ClientNamesWrongMagicAndVersion) {
  AuthToken token("shared", "test");
  {
    auto [client, server] = socket_pair();
    std::vector<uint8_t> http(net::kServerHelloBytes, ' ');
    std::memcpy(http.data(), "HTTP/1.1 400", 12);
    server.send_all(http, in(test::kLong), "fake");
    THD_EXPECT_THROW_MSG(net::client_handshake(client, token, in(test::kLong), "test.client"), ConnectionError,
                     "is not a thd server");
  }
  {
    auto [client, server] = socket_pair();
    server.send_all(server_hello(99), in(test::kLong), "fake");
    THD_EXPECT_THROW_MSG(net::client_handshake(client, token, in(test::kLong), "test.client"), ConnectionError,
                     "speaks thd handshake version 99");
  }
}

TEST(Handshake, ClientTimesOutOnASilentServer) {
  auto [client, server] = socket_pair();
  AuthToken token("shared", "test");
  THD_EXPECT_THROW_MSG(net::client_handshake(client, token, in(100ms), "test.client"), TimeoutError, "timed out");
}

}  // namespace
}  // namespace thd
