// Liveness and the lost-peer record alone, with the times injected: when a silent
// peer is lost, who is sent a heartbeat, when an exited peer is lost.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <thd/error.h>

#include "datachannel/pipe/liveness.h"
#include "datachannel/pipe/lost_peers.h"
#include "stand_in_process.h"

namespace thd::detail::pipe {
namespace {

using namespace std::chrono_literals;

const auto kT0 = net::Clock::time_point{} + std::chrono::hours(1);
auto everyone = [](int) { return true; };
auto nobody = [](int) { return false; };

LivenessTuning heartbeats(std::chrono::milliseconds interval, std::chrono::milliseconds timeout) {
  LivenessTuning t;
  t.heartbeats = true;
  t.heartbeat_interval = interval;
  t.heartbeat_timeout = timeout;
  return t;
}

TEST(Liveness, HeartbeatsGoToEveryTendedPeerOncePerInterval) {
  Liveness l(1, 4, heartbeats(500ms, 4000ms), kT0);
  auto round = l.heartbeat_round(kT0, [](int p) { return p != 3; });
  ASSERT_TRUE(round.has_value());
  EXPECT_EQ(round->send_to, (std::vector<int>{0, 2}));  // not this rank, not an untended one
  EXPECT_TRUE(round->lost.empty());
  EXPECT_FALSE(l.heartbeat_round(kT0 + 499ms, everyone).has_value());
  EXPECT_TRUE(l.heartbeat_round(kT0 + 500ms, everyone).has_value());
}

TEST(Liveness, APeerSilentPastTheTimeoutIsLostAndOneHeardFromIsNot) {
  Liveness l(0, 3, heartbeats(500ms, 4000ms), kT0);
  l.heard(2, kT0 + 3000ms);
  // Exactly the timeout is still alive; past it, lost.
  auto at_timeout = l.heartbeat_round(kT0 + 4000ms, everyone);
  ASSERT_TRUE(at_timeout.has_value());
  EXPECT_TRUE(at_timeout->lost.empty());
  auto after = l.heartbeat_round(kT0 + 4600ms, everyone);
  ASSERT_TRUE(after.has_value());
  ASSERT_EQ(after->lost.size(), 1u);
  EXPECT_EQ(after->lost[0].peer, 1);
  EXPECT_EQ(after->lost[0].why, "rank 1 sent nothing for 4000 ms (not even a heartbeat): it died or stalled");
  EXPECT_EQ(after->send_to, std::vector<int>{2});
  // A peer no longer tended (lost already) is neither sent to nor lost again.
  auto later = l.heartbeat_round(kT0 + 9000ms, [](int p) { return p != 1 && p != 2; });
  ASSERT_TRUE(later.has_value());
  EXPECT_TRUE(later->lost.empty());
  EXPECT_TRUE(later->send_to.empty());
}

TEST(Liveness, WithoutHeartbeatsNoRoundIsEverDue) {
  Liveness l(0, 2, LivenessTuning{}, kT0);
  EXPECT_FALSE(l.heartbeats());
  EXPECT_FALSE(l.heartbeat_round(kT0 + std::chrono::hours(1), everyone).has_value());
  EXPECT_EQ(l.nap(100ms), 100ms);
  Liveness h(0, 2, heartbeats(20ms, 100ms), kT0);
  EXPECT_EQ(h.nap(100ms), 20ms);
}

TEST(Liveness, AnExitedPeerIsLostOnlyAfterTheGrace) {
  LivenessTuning t;
  t.exit_grace = 200ms;
  Liveness l(0, 3, t, kT0);
  l.saw_exit(2, kT0);
  EXPECT_TRUE(l.exits(kT0 + 199ms, false, nobody).empty());
  auto gone = l.exits(kT0 + 200ms, false, nobody);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].peer, 2);
  EXPECT_NE(gone[0].why.find("rank 2's process"), std::string::npos) << gone[0].why;
  // Once lost it is not reported again.
  EXPECT_TRUE(l.exits(kT0 + 300ms, false, [](int p) { return p == 2; }).empty());
}

TEST(Liveness, TheWatchLooksOnlyWhileAPeerIsWatchedAndAtItsInterval) {
  LivenessTuning t;
  t.watch_interval = 50ms;
  Liveness l(0, 2, t, kT0);
  EXPECT_FALSE(l.watching());
  EXPECT_FALSE(l.look_due(kT0));
  EXPECT_FALSE(l.watch(1, "not an identity"));
  EXPECT_FALSE(l.watching());
  test::StandInProcess peer;
  EXPECT_TRUE(l.watch(1, peer.identity().encode()));
  EXPECT_TRUE(l.watching());
  EXPECT_TRUE(l.look_due(kT0));
  EXPECT_FALSE(l.look_due(kT0 + 49ms));
  EXPECT_TRUE(l.look_due(kT0 + 50ms));
}

TEST(Liveness, AWatchedPeerThatIsKilledIsLostAfterTheGraceNamingItsPid) {
  LivenessTuning t;
  t.exit_grace = 200ms;
  Liveness l(0, 2, t, kT0);
  test::StandInProcess peer;
  ASSERT_TRUE(l.watch(1, peer.identity().encode()));
  EXPECT_TRUE(l.exits(kT0, true, nobody).empty());
  peer.kill();
  // The pidfd turns readable once the kernel has made the zombie.
  net::Clock::time_point seen{};
  for (int i = 0; i < 200 && seen == net::Clock::time_point{}; ++i) {
    const auto now = kT0 + std::chrono::milliseconds(10 * (i + 1));
    if (!l.exits(now, true, nobody).empty()) FAIL() << "lost before the grace";
    // exits() records the exit at `now`; the grace counts from there.
    if (!l.exits(now + 200ms, false, nobody).empty()) seen = now;
    else std::this_thread::sleep_for(5ms);
  }
  ASSERT_NE(seen, net::Clock::time_point{}) << "the killed peer was never seen gone";
  auto gone = l.exits(seen + 200ms, false, nobody);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_NE(gone[0].why.find("(pid " + std::to_string(peer.pid()) + " on this host) exited"), std::string::npos)
      << gone[0].why;
}

TEST(Liveness, HeartbeatsAreRecognizedByTheirBytesAlone) {
  const auto beat = Liveness::heartbeat();
  EXPECT_TRUE(Liveness::is_heartbeat(beat));
  std::vector<uint8_t> longer(beat.begin(), beat.end());
  longer.push_back(0);
  EXPECT_FALSE(Liveness::is_heartbeat(longer));
  EXPECT_FALSE(Liveness::is_heartbeat(std::vector<uint8_t>{'t', 'h', 'd', 'A'}));
}

TEST(LostPeers, TheFirstReasonStandsAndOthersStayHealthy) {
  LostPeers lost(0, 3, "ucx backend");
  EXPECT_FALSE(lost.any());
  EXPECT_EQ(lost.error(1), nullptr);
  EXPECT_TRUE(lost.lose(1, "it said goodbye", /*departed=*/true));
  EXPECT_FALSE(lost.lose(1, "a later reason", false));
  EXPECT_TRUE(lost.any());
  EXPECT_TRUE(lost.departed(1));
  EXPECT_EQ(lost.error(2), nullptr);
  EXPECT_FALSE(lost.departed(2));
  EXPECT_EQ(lost.error(7), nullptr);  // outside the world
  try {
    std::rethrow_exception(lost.error(1));
  } catch (const PeerLost& e) {
    EXPECT_EQ(e.message(), "rank 1 is lost: it said goodbye");
    EXPECT_NE(std::string(e.what()).find("ucx backend"), std::string::npos) << e.what();
  }
  try {
    std::rethrow_exception(lost.error_for(1, "recv"));
  } catch (const PeerLost& e) {
    EXPECT_EQ(e.message(), "rank 1 is lost: it said goodbye");
    EXPECT_NE(std::string(e.what()).find("recv"), std::string::npos) << e.what();
  }
}

TEST(LostPeers, AFailureIsNotADeparture) {
  LostPeers lost(0, 2, "libfabric backend");
  EXPECT_TRUE(lost.lose(1, "its process exited", false));
  EXPECT_FALSE(lost.departed(1));
  EXPECT_NE(lost.error(1), nullptr);
}

}  // namespace
}  // namespace thd::detail::pipe
