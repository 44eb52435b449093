// thdrun's --on-rank-failure policies, driven through the real binary with
// thdrun_probe: kill-all stops an SPMD job at its first failure; master-decides
// lets the master (rank 0) outlive a failed worker and makes the master's exit
// the job's end and status; auto picks master-decides once the master has written
// the job mode file (as init_master_worker does) and kill-all otherwise.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "thdrun_runner.h"

namespace thd::test {
namespace {

using Args = std::vector<std::string>;
using namespace std::chrono_literals;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// A job whose rank 0 says it is master-worker before the rendezvous (a barrier:
// the file is there before any rank goes on), then rank 1 fails with status 3
// while the others work on for a second.
const Args kMasterWorkerJobLosingRank1 = {"@0", "master-worker", "rendezvous", "@1",    "exit",
                                          "3",  "sleep",         "1",          "print", "finished"};
// The same without the master's word: an SPMD job.
const Args kSpmdJobLosingRank1 = {"rendezvous", "@1", "exit", "3", "sleep", "20", "print", "finished"};

constexpr const char* kGoesOn = "; the job goes on: the master (rank 0) decides";

TEST(ThdrunRankFailure, AutoLetsTheMasterOfAMasterWorkerJobGoOn) {
  ThdrunResult r = run_thdrun_checked(probe_run({"-n", "4"}, kMasterWorkerJobLosingRank1));
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(count(r.out, "finished\n"), 3) << describe(r);
  EXPECT_TRUE(contains(r.err, "thdrun: rank 1 (pid ")) << describe(r);
  EXPECT_TRUE(contains(r.err, std::string("exited with status 3") + kGoesOn)) << describe(r);
  EXPECT_FALSE(contains(r.err, "stopping")) << describe(r);
}

TEST(ThdrunRankFailure, AutoStopsAnSpmdJobAtItsFirstFailure) {
  ThdrunResult r = run_thdrun_checked(probe_run({"-n", "4"}, kSpmdJobLosingRank1));
  EXPECT_EQ(r.status, 3) << describe(r);
  EXPECT_TRUE(contains(r.err, "thdrun: rank 1 (pid ")) << describe(r);
  EXPECT_TRUE(contains(r.err, "thdrun: stopping the other ranks")) << describe(r);
  EXPECT_FALSE(contains(r.err, kGoesOn)) << describe(r);
  EXPECT_FALSE(contains(r.out, "finished")) << describe(r);
  EXPECT_LT(r.elapsed, 4s) << describe(r);
}

TEST(ThdrunRankFailure, KillAllOverridesTheMastersWord) {
  ThdrunResult r =
      run_thdrun_checked(probe_run({"-n", "4", "--on-rank-failure", "kill-all"}, kMasterWorkerJobLosingRank1));
  EXPECT_EQ(r.status, 3) << describe(r);
  EXPECT_TRUE(contains(r.err, "thdrun: stopping the other ranks")) << describe(r);
  EXPECT_FALSE(contains(r.err, kGoesOn)) << describe(r);
}

TEST(ThdrunRankFailure, MasterDecidesWithoutTheMastersWord) {
  // Forced: rank 0 never wrote the job mode file. Every dead worker is named.
  ThdrunResult r = run_thdrun_checked(probe_run({"-n", "4", "--on-rank-failure", "master-decides"},
                                                {"ready", "@1", "exit", "3", "@3", "raise", "KILL", "sleep", "1",
                                                 "print", "finished"}));
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(count(r.out, "finished\n"), 2) << describe(r);
  EXPECT_TRUE(contains(r.err, std::string("exited with status 3") + kGoesOn)) << describe(r);
  EXPECT_TRUE(contains(r.err, std::string("was killed by signal SIGKILL") + kGoesOn)) << describe(r);
}

TEST(ThdrunRankFailure, AFailedMasterEndsTheJobWithItsStatus) {
  ThdrunResult r = run_thdrun_checked(
      probe_run({"-n", "3", "--on-rank-failure", "master-decides"}, {"ready", "@0", "exit", "4", "sleep", "20"}));
  EXPECT_EQ(r.status, 4) << describe(r);
  EXPECT_TRUE(contains(r.err, "thdrun: rank 0 (pid ")) << describe(r);
  EXPECT_TRUE(contains(r.err, "the master, exited with status 4")) << describe(r);
  EXPECT_TRUE(contains(r.err, "thdrun: stopping the other ranks")) << describe(r);
  EXPECT_LT(r.elapsed, 4s) << describe(r);
}

TEST(ThdrunRankFailure, WorkersLeftByASuccessfulMasterAreStoppedAfterTheGracePeriod) {
  ThdrunResult r = run_thdrun_checked(probe_run({"-n", "3", "--on-rank-failure", "master-decides", "--timeout-kill",
                                                 "0.3"},
                                                {"ready", "@0", "exit", "0", "sleep", "20"}));
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_TRUE(contains(r.err, "thdrun: the master has exited; ranks 1, 2 still running after 0.3 s")) << describe(r);
  // Stopped by thdrun: not reported as failures of their own.
  EXPECT_FALSE(contains(r.err, "rank 1 (pid")) << describe(r);
  EXPECT_GE(r.elapsed, 300ms);
  EXPECT_LT(r.elapsed, 4s) << describe(r);
}

TEST(ThdrunRankFailure, TheMastersStatusIsTheJobsEvenWhenWorkersFailAfterIt) {
  // Rank 0 exits 0 right after the rendezvous (once every rank is past it); the
  // workers fail on their own half a second later, before the grace period is over.
  ThdrunResult r = run_thdrun_checked(probe_run({"-n", "3", "--on-rank-failure", "master-decides"},
                                                {"rendezvous", "@!0", "sleep", "0.5", "@!0", "exit", "6"}));
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(count(r.err, "exited with status 6 after the master exited"), 2) << describe(r);
}

}  // namespace
}  // namespace thd::test
