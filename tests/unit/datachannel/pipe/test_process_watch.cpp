// ProcessWatch: a peer process on this host is seen gone the moment it exits
// (before it is reaped), a process elsewhere or a reused pid is never mistaken for
// the peer, and identities from the store are parsed as untrusted bytes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <thread>

#include "datachannel/pipe/process_watch.h"
#include "stand_in_process.h"

namespace thd::test {
namespace {

using detail::pipe::ProcessIdentity;
using detail::pipe::ProcessWatch;
using Clock = std::chrono::steady_clock;

// exited() until it names someone or a second passes.
std::vector<int> exited_within_a_second(ProcessWatch& watch) {
  const auto until = Clock::now() + std::chrono::seconds(1);
  for (;;) {
    auto gone = watch.exited();
    if (!gone.empty() || Clock::now() >= until) return gone;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST(ProcessWatch, ThisProcessKnowsItsBootNamespaceAndStartTime) {
  const ProcessIdentity me = detail::pipe::this_process();
  EXPECT_FALSE(me.boot_id.empty());
  EXPECT_NE(me.pid_ns_ino, 0U);
  EXPECT_EQ(me.pid, ::getpid());
  EXPECT_GT(me.start_time, 0U);
  EXPECT_TRUE(me.shares_pid_space_with(me));
}

TEST(ProcessWatch, IdentitiesRoundTripAndMalformedOnesAreRefused) {
  const ProcessIdentity me = detail::pipe::this_process();
  const auto back = ProcessIdentity::decode(me.encode());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->boot_id, me.boot_id);
  EXPECT_EQ(back->pid_ns_dev, me.pid_ns_dev);
  EXPECT_EQ(back->pid_ns_ino, me.pid_ns_ino);
  EXPECT_EQ(back->pid, me.pid);
  EXPECT_EQ(back->start_time, me.start_time);
  for (const char* bad : {"", " ", "abc", "a 1 2 3", "a 1 2 3 4 5", "zz 1 2 3 4", "ab 1 2 -3 4", "ab 1 2 0 4",
                          "ab x 2 3 4", "ab 1 2 3 4x", "ab  1 2 3 4", "ab 1 2 3 99999999999999999999999"}) {
    EXPECT_FALSE(ProcessIdentity::decode(bad).has_value()) << "'" << bad << "'";
  }
  // A rank that could not read its boot id shares a pid space with nobody.
  auto unknown = ProcessIdentity::decode("- 1 2 3 4");
  ASSERT_TRUE(unknown.has_value());
  EXPECT_FALSE(unknown->shares_pid_space_with(*unknown));
}

TEST(ProcessWatch, AKilledPeerIsReportedOnceBeforeItIsReaped) {
  StandInProcess peer;
  ProcessWatch watch;
  ASSERT_TRUE(watch.watch(3, peer.identity()));
  EXPECT_TRUE(watch.exited().empty()) << "a live process was reported gone";
  peer.kill();  // a zombie from here until reaped: already gone for the watch
  EXPECT_EQ(exited_within_a_second(watch), std::vector<int>{3});
  EXPECT_TRUE(watch.exited().empty()) << "reported twice";
  EXPECT_EQ(watch.pid_of(3), peer.pid());
}

TEST(ProcessWatch, ProcessesElsewhereOrThisOneAreNotWatched) {
  StandInProcess peer;
  ProcessWatch watch;
  ProcessIdentity other_boot = peer.identity();
  other_boot.boot_id = "00000000-0000-0000-0000-000000000000";
  EXPECT_FALSE(watch.watch(1, other_boot));
  ProcessIdentity other_namespace = peer.identity();
  other_namespace.pid_ns_ino += 1;
  EXPECT_FALSE(watch.watch(2, other_namespace));
  EXPECT_FALSE(watch.watch(4, detail::pipe::this_process()));
  EXPECT_TRUE(watch.empty());
  peer.kill();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(watch.exited().empty());
}

TEST(ProcessWatch, APidNowHeldBySomeoneElseMeansThePeerIsGone) {
  // The peer published its pid and died; the pid now names a process that started
  // at another time (here: the same child, claimed with a start time it never had).
  StandInProcess newcomer;
  ProcessIdentity stale = newcomer.identity();
  stale.start_time -= 1;
  ProcessWatch watch;
  ASSERT_TRUE(watch.watch(5, stale));
  EXPECT_EQ(watch.exited(), std::vector<int>{5});
}

TEST(ProcessWatch, APeerGoneBeforeItIsWatchedIsReported) {
  StandInProcess peer;
  const ProcessIdentity id = peer.identity();
  peer.kill();
  peer.reap();
  ProcessWatch watch;
  ASSERT_TRUE(watch.watch(6, id));
  EXPECT_EQ(watch.exited(), std::vector<int>{6});
}

}  // namespace
}  // namespace thd::test
