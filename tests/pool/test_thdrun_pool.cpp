// thdrun --pool as a program: what it prints, how it stops, and running a master
// program against the pool it hosts. run_thdrun (tests/tools) makes this process a
// child subreaper, so a worker thdrun failed to stop would be found here.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>

#include <thread>

#include "datachannel/net/socket.h"
#include "pool_process.h"
#include "test_util.h"
#include "thdrun_runner.h"

namespace thd::test {
namespace {

TEST(ThdrunPool, SigtermStopsEveryWorkerAndRemovesTheToken) {
  std::string token_file;
  mode_t token_mode = 0;
  ThdrunRun run;
  run.args = {"--pool", "-n", "3", "--listen", "127.0.0.1:0", "--timeout-kill", "2"};
  run.on_line = [&](int stream, const std::string& line, pid_t thdrun) {
    if (stream != 1) return;
    if (auto file = find_after(line + "\n", "thdrun: token"); file && file->starts_with("THD_AUTH_TOKEN_FILE=")) {
      token_file = file->substr(std::string("THD_AUTH_TOKEN_FILE=").size());
      struct stat st {};
      if (::stat(token_file.c_str(), &st) == 0) token_mode = st.st_mode & 0777;
    }
    if (line == "thdrun: pool ready") ::kill(thdrun, SIGTERM);
  };
  const ThdrunResult r = run_thdrun_checked(run);
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(r.out.find("thdrun: worker pool: tcp://127.0.0.1:"), std::string::npos) << describe(r);
  EXPECT_NE(r.out.find("(3 nodes)"), std::string::npos) << describe(r);
  EXPECT_TRUE(token_file.starts_with(r.tmpdir)) << token_file << "\n" << describe(r);
  EXPECT_EQ(token_mode, 0600u);
  EXPECT_NE(r.err.find("got SIGTERM; stopping the pool"), std::string::npos) << describe(r);
  // Workers stopped by thdrun itself are not reported as failures, and idle ones
  // end on SIGTERM without needing the SIGKILL that follows the grace period.
  EXPECT_EQ(r.err.find("starting it again"), std::string::npos) << describe(r);
  EXPECT_EQ(r.err.find("SIGKILL"), std::string::npos) << describe(r);
}

TEST(ThdrunPool, SigtermStopsWorkersInTheMiddleOfASession) {
  PoolUnderTest pool(2);
  const std::vector<pid_t> workers = pool.worker_pids();
  ASSERT_EQ(workers.size(), 2u);
  TestProcess holder({pool_master_path(), "hold", pool.url()}, {{"THD_AUTH_TOKEN", kToken}});
  ASSERT_TRUE(holder.wait_for_output("holding: ", kLong)) << holder.output();

  pool.thdrun().signal(SIGTERM);
  EXPECT_EQ(pool.thdrun().wait(kLong), 0) << pool.thdrun().output();
  // A worker in a session ends on SIGTERM too, well before the SIGKILL.
  EXPECT_EQ(pool.thdrun().output().find("SIGKILL"), std::string::npos) << pool.thdrun().output();
  // thdrun reaped them: the pids are gone (not even zombies).
  for (pid_t pid : workers) EXPECT_NE(::kill(pid, 0), 0) << "worker " << pid << " outlived thdrun";
}

TEST(ThdrunPool, RunsAProgramAsThePoolsMasterThenStops) {
  ThdrunRun run;
  run.args = {"--pool", "-n", "2", "--", pool_master_path(), "run"};
  const ThdrunResult ok = run_thdrun_checked(run);
  EXPECT_EQ(ok.status, 0) << describe(ok);
  EXPECT_NE(ok.out.find("attached: 2 nodes"), std::string::npos) << describe(ok);

  run.args = {"--pool", "-n", "1", "--", pool_master_path(), "exit", "3"};
  const ThdrunResult failed = run_thdrun_checked(run);
  EXPECT_EQ(failed.status, 3) << describe(failed);
  EXPECT_NE(failed.err.find("the program"), std::string::npos) << describe(failed);
}

TEST(ThdrunPool, AddressInUseIsALauncherError) {
  net::Socket taken = net::Socket::listen("127.0.0.1", 0, "test");
  ThdrunRun run;
  run.args = {"--pool", "-n", "1", "--listen", "127.0.0.1:" + std::to_string(taken.local_port())};
  const ThdrunResult r = run_thdrun_checked(run);
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_NE(r.err.find("thdrun: "), std::string::npos) << describe(r);
}

}  // namespace
}  // namespace thd::test
