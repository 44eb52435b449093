// The thdrun binary supervising its ranks: failures stop the job, signals reach
// the ranks, output is tagged, and nothing outlives thdrun.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "thdrun_runner.h"

namespace thd::test {
namespace {

using Args = std::vector<std::string>;
using namespace std::chrono_literals;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The pid rank `rank` printed in its "ready rank=R pid=P" line.
std::string ready_pid(const ThdrunResult& r, int rank) {
  const std::string head = "ready rank=" + std::to_string(rank) + " pid=";
  for (const std::string& line : r.out_lines()) {
    if (line.starts_with(head)) return line.substr(head.size());
  }
  return "?";
}

// Sends `sig` to thdrun once `count` ranks have printed "ready".
auto signal_when_ready(int count, int sig) {
  return [count, sig, seen = 0](int stream, const std::string& line, pid_t thdrun) mutable {
    if (stream == 1 && line.starts_with("ready ") && ++seen == count) ::kill(thdrun, sig);
  };
}

class ThdrunSupervision : public ::testing::Test {
 protected:
  ThdrunResult run(const ThdrunRun& r) { return run_thdrun_checked(r); }
};

TEST_F(ThdrunSupervision, AllRanksSucceed) {
  ThdrunResult r = run(probe_run({"-n", "4"}, {"print", "hello"}));
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.out, "hello\nhello\nhello\nhello\n");  // untouched without --tag-output
  EXPECT_EQ(r.err, "");
}

TEST_F(ThdrunSupervision, FailingRankStopsTheOthersQuickly) {
  ThdrunResult r = run(probe_run({"-n", "3"}, {"ready", "@1", "exit", "3", "sleep", "30"}));
  EXPECT_EQ(r.status, 3) << describe(r);
  EXPECT_TRUE(contains(r.err, "thdrun: rank 1 (pid " + ready_pid(r, 1) + ") exited with status 3\n")) << describe(r);
  EXPECT_TRUE(contains(r.err, "thdrun: stopping the other ranks")) << describe(r);
  // The sleepers die of SIGTERM at once; the 5 s grace period is not waited out.
  EXPECT_LT(r.elapsed, 4s) << describe(r);
  // Ranks stopped by thdrun are not failures of their own.
  EXPECT_FALSE(contains(r.err, "rank 0 (pid")) << describe(r);
  EXPECT_FALSE(contains(r.err, "rank 2 (pid")) << describe(r);
}

TEST_F(ThdrunSupervision, RankKilledBySignal) {
  ThdrunResult r = run(probe_run({"-n", "3"}, {"ready", "@2", "raise", "KILL", "sleep", "30"}));
  EXPECT_EQ(r.status, 128 + SIGKILL) << describe(r);
  EXPECT_TRUE(contains(r.err, "thdrun: rank 2 (pid " + ready_pid(r, 2) + ") was killed by signal SIGKILL\n"))
      << describe(r);
  EXPECT_TRUE(contains(r.err, "stopping the other ranks")) << describe(r);
  EXPECT_LT(r.elapsed, 4s) << describe(r);
}

TEST_F(ThdrunSupervision, FirstFailureWins) {
  // Rank 1 shrugs off the SIGTERM and fails later with another status. The
  // rendezvous is a barrier: rank 0 fails only once rank 1 ignores SIGTERM.
  ThdrunResult r = run(probe_run(
      {"-n", "2"}, {"ignore", "TERM", "rendezvous", "@0", "exit", "3", "sleep", "0.3", "print", "survived", "exit", "5"}));
  EXPECT_EQ(r.status, 3) << describe(r);
  EXPECT_TRUE(contains(r.out, "survived")) << describe(r);
  EXPECT_TRUE(contains(r.err, "rank 0 (pid")) << describe(r);
  EXPECT_FALSE(contains(r.err, "rank 1 (pid")) << describe(r);
}

TEST_F(ThdrunSupervision, SigkillAfterTheGracePeriod) {
  ThdrunResult r = run(probe_run({"-n", "3", "--timeout-kill", "0.3"},
                                 {"ignore", "TERM", "rendezvous", "@0", "exit", "5", "sleep", "30"}));
  EXPECT_EQ(r.status, 5) << describe(r);
  EXPECT_TRUE(contains(r.err, "SIGKILL in 0.3 s")) << describe(r);
  EXPECT_TRUE(contains(r.err, "thdrun: killing ranks 1, 2 (SIGKILL): still running 0.3 s after SIGTERM"))
      << describe(r);
  EXPECT_GE(r.elapsed, 300ms);
  EXPECT_LT(r.elapsed, 4s) << describe(r);
}

class ThdrunForwards : public ThdrunSupervision, public ::testing::WithParamInterface<int> {};

TEST_P(ThdrunForwards, SignalToEveryRank) {
  const int sig = GetParam();
  // Each rank takes the signal, then checks that it does not come a second time.
  ThdrunRun run_spec =
      probe_run({"-n", "3"}, {"token", "trap", "ready", "wait-signal", "20", "no-signal", "0.3"});
  run_spec.on_line = signal_when_ready(3, sig);
  ThdrunResult r = run(run_spec);
  const std::string name = std::string("SIG") + ::sigabbrev_np(sig);
  // The ranks caught it and exited 0: the job was still interrupted.
  EXPECT_EQ(r.status, 128 + sig) << describe(r);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(contains(r.out, "rank " + std::to_string(rank) + " got " + name + "\n")) << describe(r);
  }
  EXPECT_TRUE(contains(r.err, "thdrun: got " + name + "; forwarded it to the ranks")) << describe(r);
  EXPECT_FALSE(contains(r.err, "again")) << describe(r);
  const auto token_line = r.out.find("token dir=");
  ASSERT_NE(token_line, std::string::npos) << describe(r);
  const std::string dir = r.out.substr(token_line + 10, r.out.find('\n', token_line) - token_line - 10);
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
}

INSTANTIATE_TEST_SUITE_P(Signals, ThdrunForwards, ::testing::Values(SIGINT, SIGTERM, SIGHUP, SIGQUIT),
                         [](const auto& info) { return std::string(::sigabbrev_np(info.param)); });

TEST_F(ThdrunSupervision, FailureAfterAForwardedSignalStillStopsTheOthers) {
  // Every rank catches SIGHUP and goes on (SIGTERM too: the trap catches it);
  // rank 1 then fails. The others must not be left running without it.
  ThdrunRun run_spec = probe_run({"-n", "3", "--timeout-kill", "0.2"},
                                 {"trap", "ready", "wait-signal", "20", "@1", "exit", "9", "sleep", "20"});
  run_spec.on_line = signal_when_ready(3, SIGHUP);
  ThdrunResult r = run(run_spec);
  EXPECT_EQ(r.status, 9) << describe(r);
  EXPECT_TRUE(contains(r.err, "thdrun: rank 1 (pid " + ready_pid(r, 1) + ") exited with status 9")) << describe(r);
  EXPECT_TRUE(contains(r.err, "thdrun: killing ranks 0, 2 (SIGKILL)")) << describe(r);
  EXPECT_LT(r.elapsed, 4s) << describe(r);
}

TEST_F(ThdrunSupervision, SigtermEndsRanksThatDoNotCatchIt) {
  ThdrunRun run_spec = probe_run({"-n", "2"}, {"ready", "sleep", "20"});
  run_spec.on_line = signal_when_ready(2, SIGTERM);
  ThdrunResult r = run(run_spec);
  EXPECT_EQ(r.status, 128 + SIGTERM) << describe(r);
  EXPECT_TRUE(contains(r.err, "was killed by signal SIGTERM")) << describe(r);
  EXPECT_LT(r.elapsed, 4s) << describe(r);
}

TEST_F(ThdrunSupervision, SecondSigintKills) {
  ThdrunRun run_spec = probe_run({"-n", "2"}, {"ignore", "INT", "ready", "sleep", "20"});
  auto first = signal_when_ready(2, SIGINT);
  run_spec.on_line = [first](int stream, const std::string& line, pid_t thdrun) mutable {
    first(stream, line, thdrun);
    if (stream == 2 && line.starts_with("thdrun: got SIGINT")) ::kill(thdrun, SIGINT);
  };
  ThdrunResult r = run(run_spec);
  EXPECT_EQ(r.status, 128 + SIGKILL) << describe(r);
  EXPECT_TRUE(contains(r.err, "thdrun: killing ranks 0, 1 (SIGKILL): a second SIGINT")) << describe(r);
  EXPECT_LT(r.elapsed, 4s) << describe(r);
}

TEST_F(ThdrunSupervision, RanksDieWithAKilledThdrun) {
  ThdrunRun run_spec = probe_run({"-n", "2"}, {"ready", "sleep", "20"});
  run_spec.on_line = signal_when_ready(2, SIGKILL);
  run_spec.env = {{"THD_AUTH_TOKEN", "t"}};  // a SIGKILLed thdrun cannot remove a token directory
  run_spec.orphan_grace = 3000ms;
  ThdrunResult r = run_thdrun(run_spec);
  EXPECT_EQ(r.status, 128 + SIGKILL) << describe(r);
  // Orphaned, they were re-parented to this test, but died of PR_SET_PDEATHSIG.
  ASSERT_EQ(r.leftovers.size(), 2u) << describe(r);
  for (const Leftover& l : r.leftovers) {
    EXPECT_FALSE(l.killed_by_runner) << l.pid;
    EXPECT_TRUE(WIFSIGNALED(l.wait_status) && WTERMSIG(l.wait_status) == SIGKILL) << l.pid;
  }
}

TEST_F(ThdrunSupervision, TagOutputPrefixesEveryLine) {
  ThdrunResult r = run(probe_run({"-n", "2", "--tag-output"},
                                 {"print", "hello", "eprint", "oops", "print-partial", "no newline"}));
  ASSERT_EQ(r.status, 0) << describe(r);
  std::vector<std::string> out = r.out_lines();
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<std::string>{"[rank 0] hello", "[rank 0] no newline", "[rank 1] hello",
                                           "[rank 1] no newline"}))
      << describe(r);
  // A rank's lines keep their order.
  EXPECT_LT(r.out.find("[rank 1] hello"), r.out.find("[rank 1] no newline"));
  EXPECT_TRUE(contains(r.err, "[rank 0] oops\n")) << describe(r);
  EXPECT_TRUE(contains(r.err, "[rank 1] oops\n")) << describe(r);
}

TEST_F(ThdrunSupervision, TagOutputWithAFailure) {
  ThdrunResult r = run(probe_run({"-n", "2", "--tag-output"}, {"ready", "@1", "exit", "7", "sleep", "30"}));
  EXPECT_EQ(r.status, 7) << describe(r);
  EXPECT_TRUE(contains(r.out, "[rank 1] ready rank=1")) << describe(r);
  EXPECT_TRUE(contains(r.err, "thdrun: rank 1 (pid")) << describe(r);
}

}  // namespace
}  // namespace thd::test
