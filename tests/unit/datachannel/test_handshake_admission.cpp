// The limits on connections that await the auth handshake (net::HandshakeAdmission):
// how they follow the descriptor limit, who is evicted when one is reached, and a
// client that retries when its pending connection was evicted.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "datachannel/net/auth.h"
#include "datachannel/net/handshake_admission.h"
#include "datachannel/net/socket.h"
#include "datachannel/test_util.h"

namespace thd::net {
namespace {

using namespace std::chrono_literals;
using Ids = std::vector<uint64_t>;

TEST(HandshakeAdmission, LimitsFollowTheDescriptorLimit) {
  const AdmissionLimits at512 = admission_limits_for(512);
  EXPECT_EQ(at512.total, 128u);
  EXPECT_EQ(at512.per_source, 64u);
  const AdmissionLimits at1024 = admission_limits_for(1024);
  EXPECT_EQ(at1024.total, 256u);
  EXPECT_EQ(at1024.per_source, 128u);
  // Small limits keep a floor; large and unlimited ones a ceiling.
  EXPECT_EQ(admission_limits_for(20).total, 16u);
  EXPECT_EQ(admission_limits_for(20).per_source, 8u);
  EXPECT_EQ(admission_limits_for(1 << 20).total, 1024u);
  EXPECT_EQ(admission_limits_for(RLIM_INFINITY).total, 1024u);
  // Always well below the limit itself, so descriptors stay for authenticated peers.
  for (rlim_t n : {rlim_t{64}, rlim_t{256}, rlim_t{512}, rlim_t{1024}, rlim_t{4096}}) {
    EXPECT_LE(admission_limits_for(n).total, n / 4) << n;
  }
  rlimit now{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(default_admission_limits().total, admission_limits_for(now.rlim_cur).total);
}

TEST(HandshakeAdmission, UnderTheLimitsNobodyIsEvicted) {
  HandshakeAdmission a({.total = 4, .per_source = 2});
  EXPECT_EQ(a.admit(1, "10.0.0.1"), Ids{});
  EXPECT_EQ(a.admit(2, "10.0.0.1"), Ids{});
  EXPECT_EQ(a.admit(3, "10.0.0.2"), Ids{});
  EXPECT_EQ(a.pending(), 3u);
  EXPECT_EQ(a.pending_from("10.0.0.1"), 2u);
  EXPECT_EQ(a.evicted(), 0u);
}

TEST(HandshakeAdmission, ASourceAtItsLimitEvictsItsOwnOldest) {
  HandshakeAdmission a({.total = 10, .per_source = 2});
  a.admit(1, "10.0.0.1");
  a.admit(2, "10.0.0.2");  // another source: untouched throughout
  a.admit(3, "10.0.0.1");
  EXPECT_EQ(a.admit(4, "10.0.0.1"), Ids{1});
  EXPECT_EQ(a.admit(5, "10.0.0.1"), Ids{3});
  EXPECT_EQ(a.pending_from("10.0.0.1"), 2u);
  EXPECT_EQ(a.pending_from("10.0.0.2"), 1u);
  EXPECT_EQ(a.evicted(), 2u);
}

TEST(HandshakeAdmission, TheTotalLimitEvictsTheOldestOfAll) {
  HandshakeAdmission a({.total = 3, .per_source = 3});
  a.admit(1, "a");
  a.admit(2, "b");
  a.admit(3, "c");
  EXPECT_EQ(a.admit(4, "d"), Ids{1});
  EXPECT_EQ(a.admit(5, "d"), Ids{2});
  EXPECT_EQ(a.pending(), 3u);
}

TEST(HandshakeAdmission, ReleasedConnectionsFreeTheirPlace) {
  HandshakeAdmission a({.total = 2, .per_source = 2});
  a.admit(1, "a");
  a.admit(2, "a");
  a.release(1);  // authenticated
  a.release(1);  // and closed later: harmless
  a.release(99);
  EXPECT_EQ(a.admit(3, "a"), Ids{});
  EXPECT_EQ(a.admit(4, "a"), Ids{2});
  EXPECT_EQ(a.pending(), 2u);
}

TEST(HandshakeAdmission, ALegitimateNewcomerOutlivesAFlood) {
  const AdmissionLimits limits = admission_limits_for(512);
  HandshakeAdmission a(limits);
  uint64_t id = 0;
  size_t evicted = 0;
  // A thousand silent connections from one address, and one from elsewhere.
  a.admit(++id, "10.9.9.9");
  const uint64_t elsewhere = id;
  for (int i = 0; i < 1000; ++i) evicted += a.admit(++id, "127.0.0.1").size();
  EXPECT_EQ(a.pending_from("127.0.0.1"), limits.per_source);
  EXPECT_EQ(evicted, 1000 - limits.per_source);
  // The other source's connection was never touched by the flood.
  EXPECT_EQ(a.pending_from("10.9.9.9"), 1u);
  // A client from the flooding address is admitted at once, and stays until a
  // whole per-source limit's worth of newer connections arrives.
  const uint64_t newcomer = ++id;
  EXPECT_EQ(a.admit(newcomer, "127.0.0.1").size(), 1u);
  for (size_t i = 0; i + 1 < limits.per_source; ++i) {
    const Ids out = a.admit(++id, "127.0.0.1");
    ASSERT_EQ(out.size(), 1u);
    EXPECT_NE(out.front(), newcomer);
    EXPECT_NE(out.front(), elsewhere);
  }
  EXPECT_EQ(a.admit(++id, "127.0.0.1"), Ids{newcomer});
}

TEST(HandshakeAdmission, SourceAddressHasNoPort) {
  Socket listener = Socket::listen("127.0.0.1", 0, "test");
  Socket client = Socket::connect("127.0.0.1", listener.local_port(), deadline_after(5s), "test");
  Socket served;
  for (int i = 0; i < 500 && !served.valid(); ++i) {
    served = listener.accept(nullptr);
    if (!served.valid()) std::this_thread::sleep_for(2ms);
  }
  ASSERT_TRUE(served.valid());
  EXPECT_EQ(source_address(served.fd()), "127.0.0.1");
  EXPECT_EQ(source_address(-1), "?");
}

// A server that closes the first connection unanswered (as a listener evicting it
// would) and completes the handshake on the second.
TEST(ConnectAuthenticated, RetriesAConnectionClosedDuringTheHandshake) {
  const AuthToken token(test::kToken, "test");
  Socket listener = Socket::listen("127.0.0.1", 0, "test");
  std::atomic<int> accepted{0};
  std::thread server([&] {
    const Deadline deadline = deadline_after(10s);
    while (accepted.load() < 2 && Clock::now() < deadline) {
      Socket s = listener.accept(nullptr);
      if (!s.valid()) {
        std::this_thread::sleep_for(1ms);
        continue;
      }
      if (++accepted == 1) continue;  // closed at once
      ServerHandshake h(token);
      s.send_all(h.hello(), deadline, "test");
      s.recv_exact(h.input(), deadline, "test");
      h.received(h.input().size());
      const ServerHandshake::Verdict v = h.verify();
      s.send_all(v.reply, deadline, "test");
      std::this_thread::sleep_for(100ms);  // the client reads the verdict before the close
    }
  });
  EXPECT_NO_THROW(connect_authenticated("127.0.0.1", listener.local_port(), token, deadline_after(5s), "test"));
  server.join();
  EXPECT_EQ(accepted.load(), 2);
}

TEST(ConnectAuthenticated, GivesUpAtTheDeadline) {
  const AuthToken token(test::kToken, "test");
  Socket listener = Socket::listen("127.0.0.1", 0, "test");
  std::atomic<bool> stop{false};
  std::thread server([&] {
    while (!stop.load()) {
      Socket s = listener.accept(nullptr);  // and closed at once, every time
      if (!s.valid()) std::this_thread::sleep_for(1ms);
    }
  });
  const auto start = Clock::now();
  EXPECT_THROW(connect_authenticated("127.0.0.1", listener.local_port(), token, deadline_after(300ms), "test"),
               Error);  // PeerLost, or TimeoutError when the deadline falls mid-handshake
  EXPECT_LT(Clock::now() - start, 2s);
  stop = true;
  server.join();
}

}  // namespace
}  // namespace thd::net
