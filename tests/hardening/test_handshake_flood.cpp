// A flood of silent connections does not delay a legitimate client: the listener,
// in a process with a 512-descriptor limit, gets 1,000 loopback connections that
// never say a word, and then a client with the job's token must get through at
// once (well inside the 5 s handshake timeout that would otherwise free the
// descriptors the silent ones hold). For the TCPStore server (which is also a
// worker pool's address) and the tcp DataChannel's mesh listener.
// tests/unit/datachannel/test_handshake_admission.cpp checks the policy itself.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <thd/store.h>

#include "datachannel/net/fd.h"
#include "pool_process.h"
#include "roles.h"
#include "test_util.h"
#include "worker_job.h"

namespace thd::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kSilent = 1000;
constexpr const char* kDescriptorLimit = "512";
constexpr auto kLegitimateWithin = 1500ms;

// n connections to 127.0.0.1:port that never send a byte. Nonblocking, so a
// listener that stops accepting (its backlog full) does not stall the test.
std::vector<net::UniqueFd> silent_connections(uint16_t port, int n) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<net::UniqueFd> out;
  for (int i = 0; i < n; ++i) {
    net::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) break;
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS) break;
    out.push_back(std::move(fd));
  }
  return out;
}

uint16_t listening_port(TestProcess& p) {
  if (!p.wait_for_output("listening port=", 20000ms)) return 0;
  const std::string out = p.output();
  const size_t at = out.find("listening port=") + 15;
  return static_cast<uint16_t>(std::stoi(out.substr(at, out.find('\n', at) - at)));
}

long long ms(Clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

TEST(HandshakeFlood, StoreServerLetsALegitimateClientInAtOnce) {
  TestProcess server({self_path(), kListenerRole, "store"},
                     {{"THD_AUTH_TOKEN", kToken}, {"THD_HARDENING_NOFILE", kDescriptorLimit}});
  const uint16_t port = listening_port(server);
  ASSERT_NE(port, 0) << server.output();
  const std::vector<net::UniqueFd> silent = silent_connections(port, kSilent);
  ASSERT_EQ(silent.size(), static_cast<size_t>(kSilent));
  std::this_thread::sleep_for(500ms);  // the server takes in what it will of them

  const auto start = Clock::now();
  TCPStore client({.port = port, .timeout = 10000ms, .token = std::string(kToken)});
  client.set("legitimate", "1");
  EXPECT_EQ(client.get("legitimate"), std::vector<uint8_t>{'1'});
  const auto took = Clock::now() - start;
  EXPECT_LT(took, kLegitimateWithin) << server.output();
  std::fprintf(stderr, "[ figure ] store server, %s descriptors, %d silent connections: a client got in in %lld ms\n",
               kDescriptorLimit, kSilent, ms(took));
  // Still serving: a second client.
  TCPStore again({.port = port, .timeout = 10000ms, .token = std::string(kToken)});
  EXPECT_EQ(again.get("legitimate"), std::vector<uint8_t>{'1'});
  EXPECT_TRUE(server.running()) << server.output();
}

TEST(HandshakeFlood, MeshListenerLetsTheRanksInAtOnce) {
  TempDir dir;
  const std::string release = dir.file("release");
  TestProcess job({self_path(), kListenerRole, "mesh"}, {{"THD_AUTH_TOKEN", kToken},
                                                         {"THD_HARDENING_NOFILE", kDescriptorLimit},
                                                         {"THD_HARDENING_RELEASE", release}});
  const uint16_t port = listening_port(job);
  ASSERT_NE(port, 0) << job.output();
  const std::vector<net::UniqueFd> silent = silent_connections(port, kSilent);
  ASSERT_EQ(silent.size(), static_cast<size_t>(kSilent));
  std::this_thread::sleep_for(500ms);
  { std::FILE* f = std::fopen(release.c_str(), "w"); ASSERT_NE(f, nullptr); std::fclose(f); }
  ASSERT_TRUE(job.wait_for_output("mesh ", 20000ms)) << job.output();
  ASSERT_EQ(job.wait(20000ms), 0) << job.output();
  const std::string out = job.output();
  const size_t at = out.find("mesh complete in ");
  ASSERT_NE(at, std::string::npos) << out;
  const long long took = std::stoll(out.substr(at + 17));
  EXPECT_LT(took, std::chrono::duration_cast<std::chrono::milliseconds>(kLegitimateWithin).count()) << out;
  std::fprintf(stderr, "[ figure ] mesh listener, %s descriptors, %d silent connections: ranks 1, 2 connected in %lld ms\n",
               kDescriptorLimit, kSilent, took);
}

}  // namespace
}  // namespace thd::test
